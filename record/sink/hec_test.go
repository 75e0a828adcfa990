package sink

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestHECSinkDelivers: a HEC sink posts every entry once, with its time,
// host, source, sourcetype, index, fields seq and kind and the line as the
// event, gzip'd, on one channel, a Runner's batch split into requests of
// MaxEvents; with the receiver's acks on it polls until they are acked,
// and without, a 200 is written.
func TestHECSinkDelivers(t *testing.T) {
	for _, tc := range []struct {
		name, format string
		acks         bool
	}{{"jsonl without acks", FormatJSONL, false}, {"jsonl with acks", FormatJSONL, true}, {"ocsf with acks", FormatOCSF, true}} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newHECReceiver("tok", tc.acks)
			addr := rcv.serve(t, "127.0.0.1:0")
			tokFile := filepath.Join(t.TempDir(), "token")
			os.WriteFile(tokFile, []byte("tok\n"), 0o600)
			s, err := NewHEC(HECConfig{URL: "http://" + addr, TokenFile: tokFile, Index: "main", Host: "web1", Format: tc.format, MaxEvents: 5})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			j, dir := testJournal(t)
			appendExecs(t, j, 30)
			if _, err := j.Checkpoint(context.Background()); err != nil {
				t.Fatal(err)
			}
			appendExecs(t, j, 10)
			r, _ := start(t, Config{Name: "hec", Format: tc.format, JournalDir: dir, CursorDir: t.TempDir(), Batch: 16}, s, j)
			waitLen(t, "cursor", 40, func() int { return int(r.Status().Cursor) })
			waitLen(t, "events", 41, func() int { return len(rcv.snapshot()) })
			checkHECEvents(t, tc.format, rcv.snapshot(), storedLines(t, dir))
			for seq, n := range rcv.seqCounts(t) {
				if n != 1 {
					t.Errorf("seq %d arrived %d times, want once", seq, n)
				}
			}
			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			if rcv.requests < 8 || rcv.gzipped != rcv.requests || len(rcv.channels) != 1 || (tc.acks && rcv.ackPolls == 0) {
				t.Errorf("%d requests (%d gzip'd), channels %v, %d ack polls; want 8 or more, all gzip'd, one channel, polls with acks on",
					rcv.requests, rcv.gzipped, rcv.channels, rcv.ackPolls)
			}
			for ch := range rcv.channels {
				if !uuidPattern.MatchString(ch) {
					t.Errorf("channel %q, want a UUID", ch)
				}
			}
		})
	}
}

func checkHECEvents(t *testing.T, format string, evs []hecTestEvent, stored map[uint64][]byte) {
	t.Helper()
	checkpoints := 0
	for _, e := range evs {
		if e.Source != "sandtrail" || e.Sourcetype != "sandtrail:"+format || e.Host != "web1" || e.Index != "main" {
			t.Errorf("event %+v: want source sandtrail, sourcetype sandtrail:%s, host web1, index main", e, format)
		}
		if e.Fields["checkpoint"] != "" {
			checkpoints++
			if _, err := Checkpoints(strings.NewReader(string(e.Event))); err != nil || e.Fields["kind"] != "checkpoint" || e.Time != "" {
				t.Errorf("checkpoint event %+v: %v", e, err)
			}
			continue
		}
		seq := e.Fields["seq"]
		if e.Fields["kind"] != "process.exec" || e.Time != "1000000000.000000" {
			t.Errorf("seq %s: kind %q, time %q; want process.exec, 1000000000.000000", seq, e.Fields["kind"], e.Time)
		}
		var n uint64
		fmt.Sscan(seq, &n)
		if format == FormatJSONL && !jsonEqual(e.Event, stored[n]) {
			t.Errorf("seq %s: event %s, want the stored line %s", seq, e.Event, stored[n])
		}
		if format == FormatOCSF && !strings.Contains(string(e.Event), `"class_uid":1007`) {
			t.Errorf("seq %s: event %s, want an OCSF Process Activity", seq, e.Event)
		}
	}
	if checkpoints == 0 {
		t.Error("no checkpoint event, want the journal's checkpoint")
	}
}

// TestHECSinkOutage: a Runner streams 3,000 entries from a journal through
// a HEC sink with acks on; the receiver is killed mid-stream (its
// listener and connections closed at once, requests in flight cut) and
// started again on the same port; every seq arrives at least once, and
// after dedupe by fields.seq exactly once.
func TestHECSinkOutage(t *testing.T) {
	rcv := newHECReceiver("tok", true)
	addr := rcv.serve(t, "127.0.0.1:0")
	s, err := NewHEC(HECConfig{URL: "http://" + addr, Token: "tok", Host: "h", MaxEvents: 20, Timeout: 5 * time.Second, AckTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	outage(t, s, rcv.kill, func() { rcv.serve(t, addr) }, func() map[uint64]int { return rcv.seqCounts(t) })
}

// TestHECSinkTLS: over https the receiver's certificate must chain to the
// CA file; without it (the system's roots), the write fails.
func TestHECSinkTLS(t *testing.T) {
	rcv := newHECReceiver("tok", false)
	srv := httptest.NewUnstartedServer(rcv)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	batch := []Entry{{Seq: 1, Kind: "k", TS: time.Now(), Line: []byte(`{"a":1}`)}}
	for _, tc := range []struct {
		name, ca string
		ok       bool
	}{{"trusting the CA file", ca, true}, {"the system's roots", "", false}} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewHEC(HECConfig{URL: srv.URL, Token: "tok", CAFile: tc.ca})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			err = s.Write(context.Background(), batch)
			if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "certificate")) {
				t.Errorf("Write = %v, want ok %v (or a certificate error)", err, tc.ok)
			}
		})
	}
}

// TestHECRefusals: what a receiver's refusal becomes: a bad token a
// *ReceiverError with the receiver's text, not temporary; 429 and 503
// temporary with their Retry-After; a 200 with a code other than 0 an
// error; acks that never come an error after AckTimeout.
func TestHECRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		wantErr string
		temp    bool
		wait    time.Duration
	}{
		{name: "bad token", handler: newHECReceiver("other", false).ServeHTTP, wantErr: "401 Unauthorized: Invalid authorization (code 3)"},
		{name: "busy", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3")
			hecAnswer(w, http.StatusServiceUnavailable, "Server is busy", 9)
		}, wantErr: "503 Service Unavailable: Server is busy (code 9) (retry after 3s)", temp: true, wait: 3 * time.Second},
		{name: "throttled", handler: func(w http.ResponseWriter, r *http.Request) {
			hecAnswer(w, http.StatusTooManyRequests, "Too many requests", 0)
		}, wantErr: "429 Too Many Requests", temp: true},
		{name: "a 200 with a code", handler: func(w http.ResponseWriter, r *http.Request) {
			hecAnswer(w, http.StatusOK, "Invalid data format", 6)
		}, wantErr: "code 6: Invalid data format"},
		{name: "acks never acked", handler: func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			if r.URL.Path == "/services/collector/ack" {
				io.WriteString(w, `{"acks":{"0":false}}`)
				return
			}
			io.WriteString(w, `{"text":"Success","code":0,"ackId":0}`)
		}, wantErr: "1 ack ids not acknowledged within 100ms"},
		{name: "a redirect, not followed", handler: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/services/collector/event" {
				t.Errorf("the sink followed the redirect to %s", r.URL.Path)
			}
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}, wantErr: "307"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			s, err := NewHEC(HECConfig{URL: srv.URL, Token: "tok", AckTimeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Write(context.Background(), []Entry{{Seq: 9, Kind: "k", Line: []byte(`{}`)}})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "seqs 9-9") {
				t.Fatalf("Write = %v, want an error naming seqs 9-9 with %q", err, tc.wantErr)
			}
			var re *ReceiverError
			if errors.As(err, &re) != (tc.temp || tc.wait > 0 || tc.name == "bad token" || tc.name == "a redirect, not followed") {
				t.Fatalf("Write = %#v: a *ReceiverError only for a refusal", err)
			}
			if re != nil && (re.Temporary() != tc.temp || re.RetryAfter() != tc.wait) {
				t.Errorf("Temporary %v, RetryAfter %s; want %v, %s", re.Temporary(), re.RetryAfter(), tc.temp, tc.wait)
			}
		})
	}
}

// TestHECConfig: what NewHEC refuses, and the channel it derives.
func TestHECConfig(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("  abc \n"), 0o600)
	for _, tc := range []struct {
		name string
		cfg  HECConfig
		ok   bool
	}{
		{"https", HECConfig{URL: "https://splunk.example:8088", Token: "t"}, true},
		{"loopback http", HECConfig{URL: "http://localhost:8088", TokenFile: tok}, true},
		{"remote http", HECConfig{URL: "http://splunk.example:8088", Token: "t"}, false},
		{"no token", HECConfig{URL: "https://splunk.example"}, false},
		{"token and token_file", HECConfig{URL: "https://splunk.example", Token: "t", TokenFile: tok}, false},
		{"missing token_file", HECConfig{URL: "https://splunk.example", TokenFile: "/nonexistent"}, false},
		{"a token with a line break", HECConfig{URL: "https://splunk.example", Token: "t\nX-Evil: 1"}, false},
		{"bad compression", HECConfig{URL: "https://splunk.example", Token: "t", Compression: "br"}, false},
		{"a CA file with no certificate", HECConfig{URL: "https://splunk.example", Token: "t", CAFile: tok}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewHEC(tc.cfg)
			if (err == nil) != tc.ok {
				t.Errorf("NewHEC = %v, want ok %v", err, tc.ok)
			}
		})
	}
	a, b := hecChannel("splunk", "h", "https://s", ""), hecChannel("splunk", "h", "https://s", "")
	if a != b || !uuidPattern.MatchString(a) || a == hecChannel("splunk", "h2", "https://s", "") || a == hecChannel("soc", "h", "https://s", "") {
		t.Errorf("hecChannel = %q, %q: want one UUID per sink, host, URL and index, the same each time", a, b)
	}
}

// FuzzParseHECResponse: a receiver's answers never panic the parsers.
func FuzzParseHECResponse(f *testing.F) {
	for _, s := range []string{``, `{"text":"Success","code":0}`, `{"text":"Success","code":0,"ackId":3}`, `{"code":6,"text":"x"}`,
		`{"acks":{"0":true,"1":false}}`, `{"acks":{"x":true}}`, `{"ackId":-1}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseHECResponse(b)
		ParseHECAcks(b)
	})
}
