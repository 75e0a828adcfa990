package sink

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/sink/sinktest"
)

// storedLines reads the journal's entries, by seq.
func storedLines(t *testing.T, dir string) map[uint64][]byte {
	t.Helper()
	out := map[uint64][]byte{}
	err := journal.Scan(dir, 0, func(seq uint64, raw []byte) error {
		out[seq] = append([]byte(nil), raw...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// seqCounts counts the records of each seq (checkpoints left out).
func seqCounts(t *testing.T, recs []otlpRecord) map[uint64]int {
	t.Helper()
	n := map[uint64]int{}
	for _, r := range recs {
		if r.attr("sandtrail.checkpoint") != "" {
			continue
		}
		seq, err := strconv.ParseUint(r.attr("sandtrail.seq"), 10, 64)
		if err != nil {
			t.Fatalf("a record's sandtrail.seq %q: %v", r.attr("sandtrail.seq"), err)
		}
		n[seq]++
	}
	return n
}

// TestOTLPSinkToCollector: an OTLP sink exports every entry once to a real
// OpenTelemetry Collector (its otlp receiver, its file exporter): body the
// stored line, sandtrail.seq and sandtrail.kind, the event's time, the
// resource's host.name; a jsonl and an ocsf sink side by side.
func TestOTLPSinkToCollector(t *testing.T) {
	col := sinktest.StartCollector(t)
	j, dir := testJournal(t)
	appendExecs(t, j, 30)
	for _, format := range []string{FormatJSONL, FormatOCSF} {
		o, err := NewOTLP(OTLPConfig{Endpoint: col.Endpoint(), Host: "host-" + format})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		r, _ := start(t, Config{Name: "otlp-" + format, Format: format, JournalDir: dir, CursorDir: t.TempDir(), Batch: 8}, o, j)
		waitLen(t, format+" cursor", 30, func() int { return int(r.Status().Cursor) })
	}
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendExecs(t, j, 10)
	stored := storedLines(t, dir)
	waitLen(t, "records", 2*40+2, func() int { return len(collectorRecords(t, col)) })
	byHost := map[string][]otlpRecord{}
	for _, r := range collectorRecords(t, col) {
		byHost[r.Host] = append(byHost[r.Host], r)
	}
	for _, format := range []string{FormatJSONL, FormatOCSF} {
		t.Run(format, func(t *testing.T) {
			recs := byHost["host-"+format]
			for seq, n := range seqCounts(t, recs) {
				if n != 1 || seq >= 40 {
					t.Errorf("seq %d arrived %d times, want once", seq, n)
				}
			}
			if n := len(seqCounts(t, recs)); n != 40 {
				t.Errorf("%d seqs arrived, want 40", n)
			}
			checkOTLPRecords(t, format, recs, stored)
		})
	}
	// verify --against reads the collector's file as it stored them.
	for _, name := range col.Files() {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		cps, err := Checkpoints(f)
		f.Close()
		if err != nil || len(cps) != 1 {
			t.Errorf("Checkpoints of the collector's file = %d notes, %v; want the one checkpoint", len(cps), err)
		}
	}
}

func checkOTLPRecords(t *testing.T, format string, recs []otlpRecord, stored map[uint64][]byte) {
	t.Helper()
	checkpoints := 0
	for _, r := range recs {
		body := *r.Body.StringValue
		if r.attr("sandtrail.checkpoint") != "" {
			checkpoints++
			if _, err := Checkpoints(strings.NewReader(body)); err != nil || r.attr("sandtrail.kind") != "checkpoint" {
				t.Errorf("checkpoint record %s, %s: %v", body, r.attr("sandtrail.kind"), err)
			}
			continue
		}
		seq, _ := strconv.ParseUint(r.attr("sandtrail.seq"), 10, 64)
		if r.SeverityText != "INFO" || r.SeverityNumber != otlpSeverityInfo || r.attr("sandtrail.kind") != "process.exec" {
			t.Errorf("seq %d: severity %s %d, kind %q; want INFO 9, process.exec", seq, r.SeverityText, r.SeverityNumber, r.attr("sandtrail.kind"))
		}
		if r.TimeUnixNano != strconv.FormatInt(time.Unix(1e9, 0).UnixNano(), 10) || r.ObservedTimeUnixNano == "" {
			t.Errorf("seq %d: time %s, observed %s; want the event's ts and the send's", seq, r.TimeUnixNano, r.ObservedTimeUnixNano)
		}
		if format == FormatJSONL && body != string(stored[seq]) {
			t.Errorf("seq %d: body %s, want the stored line %s", seq, body, stored[seq])
		}
		if format == FormatOCSF && !strings.Contains(body, `"class_uid":1007`) {
			t.Errorf("seq %d: body %s, want an OCSF Process Activity", seq, body)
		}
	}
	if checkpoints == 0 {
		t.Error("no checkpoint record, want the journal's checkpoint")
	}
}

// TestOTLPSinkCollectorOutage: a Runner streams 3,000 entries from a
// journal through an OTLP sink into a real collector, which is killed
// (SIGKILL) mid-stream and started again on the same port; every seq
// arrives at least once, and after dedupe by seq exactly once. The file
// exporter writes each export to its file before the receiver answers
// (sinktest's collector config), so a SIGKILL loses nothing the sink was
// told was written; what was in flight is sent again.
func TestOTLPSinkCollectorOutage(t *testing.T) {
	col := sinktest.StartCollector(t)
	o, err := NewOTLP(OTLPConfig{Endpoint: col.Endpoint(), Host: "h", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	outage(t, o, col.Kill, col.Start, func() map[uint64]int { return seqCounts(t, collectorRecords(t, col)) })
}

// outage streams 3,000 entries through s, calls kill once about a third
// have been written, journals more while the receiver is down, calls
// restart, and checks with counts that every seq arrived.
func outage(t *testing.T, s Sink, kill, restart func(), counts func() map[uint64]int) {
	t.Helper()
	const total = 3000
	j, dir := testJournal(t)
	r, _ := start(t, Config{Name: "outage", JournalDir: dir, CursorDir: t.TempDir(), Batch: 64, MaxBackoff: 200 * time.Millisecond}, s, j)
	for j.Size() < total/3 {
		appendExecs(t, j, 50)
		time.Sleep(5 * time.Millisecond)
	}
	waitLen(t, "cursor before the kill", 200, func() int { return int(r.Status().Cursor) })
	kill()
	for j.Size() < total {
		appendExecs(t, j, 50)
	}
	time.Sleep(500 * time.Millisecond)
	if st := r.Status(); st.Lag == 0 || st.LastError == "" {
		t.Errorf("Status with the receiver down = %+v, want a lag and an error", st)
	}
	restart()
	waitLen(t, "cursor after the restart", total, func() int { return int(r.Status().Cursor) })
	got := counts()
	dups := checkDelivered(t, total, got)
	t.Logf("%d entries, %d distinct seqs, %d duplicates (sent again after the kill)", total, len(got), dups)
}

// TestOTLPReceiverAnswers: how the sink reads what a receiver answers: a
// 200 is written, a partial success that rejected records is an error
// naming the receiver's message, a 429 or 503 an error carrying its
// Retry-After (the Runner waits that long), a 400 an error with the
// body's message; every request is gzip'd JSON to /v1/logs.
func TestOTLPReceiverAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, answer, retryAfter string
		status                   int
		wantErr                  string
		wantWait                 time.Duration
	}{
		{name: "written", status: 200, answer: `{"partialSuccess":{}}`},
		{name: "empty", status: 200},
		{name: "rejected", status: 200, answer: `{"partialSuccess":{"rejectedLogRecords":"2","errorMessage":"too old"}}`, wantErr: "rejected 2 of 3 log records: too old"},
		{name: "rejected as a number", status: 200, answer: `{"partialSuccess":{"rejectedLogRecords":1}}`, wantErr: "rejected 1 of 3"},
		{name: "throttled", status: 429, retryAfter: "7", wantErr: "429 Too Many Requests", wantWait: 7 * time.Second},
		{name: "unavailable", status: 503, retryAfter: "2", answer: `{"code":14,"message":"busy"}`, wantErr: "busy (code 14) (retry after 2s)", wantWait: 2 * time.Second},
		{name: "bad request", status: 400, answer: `{"code":3,"message":"bad json"}`, wantErr: "400 Bad Request: bad json (code 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/logs" || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Content-Encoding") != "gzip" ||
					r.Header.Get("X-Tenant") != "t1" {
					t.Errorf("request %s %v, want gzip'd JSON to /v1/logs with X-Tenant", r.URL.Path, r.Header)
				}
				zr, err := gzip.NewReader(r.Body)
				if err == nil {
					var body []byte
					body, err = io.ReadAll(zr)
					if err == nil && !json.Valid(body) {
						err = errors.New("not JSON")
					}
				}
				if err != nil {
					t.Errorf("body: %v", err)
				}
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.answer)
			}))
			defer srv.Close()
			o, err := NewOTLP(OTLPConfig{Endpoint: srv.URL + "/", Headers: map[string]string{"X-Tenant": "t1"}})
			if err != nil {
				t.Fatal(err)
			}
			err = o.Write(context.Background(), []Entry{{Seq: 1, Kind: "k", Line: []byte(`{}`)}, {Seq: 2, Line: []byte(`{}`)}, {Seq: 3, Line: []byte(`{}`)}})
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Write = %v, want an error with %q", err, tc.wantErr)
			}
			r := &Runner{cfg: Config{MaxBackoff: 10 * time.Second}}
			if got := r.retryWait(err, time.Second); got != max(time.Second, tc.wantWait) {
				t.Errorf("retryWait = %s, want %s", got, max(time.Second, tc.wantWait))
			}
		})
	}
}

// TestOTLPSplitsBatches: a batch larger than MaxBytes goes in several
// requests, each under it, every entry in one of them.
func TestOTLPSplitsBatches(t *testing.T) {
	var sizes []int
	seqs := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sizes = append(sizes, len(b))
		for _, rec := range decodeExport(t, b) {
			seqs[rec.attr("sandtrail.seq")]++
		}
	}))
	defer srv.Close()
	o, err := NewOTLP(OTLPConfig{Endpoint: srv.URL, Compression: "none", MaxBytes: 2000, Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	var batch []Entry
	for i := range 40 {
		batch = append(batch, Entry{Seq: uint64(i), Kind: "k", TS: time.Now(), Line: bytes.Repeat([]byte("x"), 100)})
	}
	if err := o.Write(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	for _, n := range sizes {
		if n > 2000 {
			t.Errorf("a request of %d bytes, want at most 2000", n)
		}
	}
	if len(sizes) < 3 || len(seqs) != 40 {
		t.Errorf("%d requests carrying %d seqs, want several carrying 40", len(sizes), len(seqs))
	}
}

// TestOTLPConfig: what NewOTLP refuses.
func TestOTLPConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  OTLPConfig
		ok   bool
	}{
		{"loopback http", OTLPConfig{Endpoint: "http://127.0.0.1:4318"}, true},
		{"remote http without credentials", OTLPConfig{Endpoint: "http://collector.example:4318"}, true},
		{"remote http with a header", OTLPConfig{Endpoint: "http://collector.example:4318", Headers: map[string]string{"Authorization": "Bearer x"}}, false},
		{"remote https with a header", OTLPConfig{Endpoint: "https://collector.example", Headers: map[string]string{"Authorization": "Bearer x"}}, true},
		{"no scheme", OTLPConfig{Endpoint: "collector:4318"}, false},
		{"a header with a line break", OTLPConfig{Endpoint: "http://127.0.0.1", Headers: map[string]string{"X": "a\r\nB: c"}}, false},
		{"bad compression", OTLPConfig{Endpoint: "http://127.0.0.1", Compression: "zstd"}, false},
		{"missing ca file", OTLPConfig{Endpoint: "https://127.0.0.1", CAFile: "/nonexistent"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewOTLP(tc.cfg)
			if (err == nil) != tc.ok {
				t.Errorf("NewOTLP = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// FuzzParseOTLPResponse: a receiver's answer never panics the parser.
func FuzzParseOTLPResponse(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"partialSuccess":{}}`, `{"partialSuccess":{"rejectedLogRecords":"3","errorMessage":"x"}}`,
		`{"partialSuccess":{"rejectedLogRecords":-1}}`, `{"partialSuccess":{"rejectedLogRecords":"x"}}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := ParseOTLPResponse(b, 1); err != nil && len(err.Error()) > 2*maxResponseText+200 {
			t.Errorf("an error of %d bytes", len(err.Error()))
		}
	})
}
