package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

func frame(payload []byte) []byte {
	b := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(b, uint32(len(payload)))
	copy(b[4:], payload)
	return b
}

func TestReadFrame(t *testing.T) {
	huge := make([]byte, 4)
	binary.BigEndian.PutUint32(huge, MaxFrame+1)
	tests := []struct {
		name    string
		in      []byte
		want    string
		wantErr error
	}{
		{name: "ok", in: frame([]byte(`{"v":1}`)), want: `{"v":1}`},
		{name: "clean eof", in: nil, wantErr: io.EOF},
		{name: "short header", in: []byte{0, 0}, wantErr: io.ErrUnexpectedEOF},
		{name: "empty", in: frame(nil), wantErr: ErrEmptyFrame},
		{name: "oversized", in: huge, wantErr: ErrFrameTooLarge},
		{name: "short body", in: frame([]byte("hello"))[:6], wantErr: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadFrame(bytes.NewReader(tt.in), MaxFrame)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ReadFrame(%q) error = %v, want %v", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("ReadFrame(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestWriteFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFrame(&buf, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFrame(&buf, MaxFrame)
	if err != nil || string(got) != "abc" {
		t.Fatalf("ReadFrame(WriteFrame(abc)) = %q, %v, want abc", got, err)
	}
	if err := WriteFrame(&buf, make([]byte, MaxFrame+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("WriteFrame(MaxFrame+1 bytes) = %v, want ErrFrameTooLarge", err)
	}
	if err := WriteFrame(&buf, nil); !errors.Is(err, ErrEmptyFrame) {
		t.Fatalf("WriteFrame(nil) = %v, want ErrEmptyFrame", err)
	}
}

func TestDecodeRequest(t *testing.T) {
	many := `{"v":1,"events":[` + strings.Repeat(`{},`, MaxBatch) + `{}]}`
	tests := []struct {
		name    string
		in      string
		wantN   int
		wantErr bool
	}{
		{name: "one event", in: `{"v":1,"events":[{"kind":"tool.invoke"}]}`, wantN: 1},
		{name: "not json", in: `hello`, wantErr: true},
		{name: "wrong version", in: `{"v":2,"events":[{}]}`, wantErr: true},
		{name: "no events", in: `{"v":1,"events":[]}`, wantErr: true},
		{name: "unknown field", in: `{"v":1,"events":[{}],"session_id":"b"}`, wantErr: true},
		{name: "trailing data", in: `{"v":1,"events":[{}]} {}`, wantErr: true},
		{name: "events not array", in: `{"v":1,"events":{}}`, wantErr: true},
		{name: "too many events", in: many, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := DecodeRequest([]byte(tt.in))
			if tt.wantErr {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("DecodeRequest(%.40q) = %v, want ErrMalformed", tt.in, err)
				}
				return
			}
			if err != nil || len(req.Events) != tt.wantN {
				t.Fatalf("DecodeRequest(%.40q) = %v, %v, want %d events", tt.in, req, err, tt.wantN)
			}
		})
	}
}

func TestDecodeEvent(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr bool
	}{
		{name: "tool", in: `{"v":1,"seq":0,"ts":"2026-01-02T03:04:05Z","session_id":"","kind":"tool.invoke","source":"","tool":{"name":"x"}}`},
		{name: "unknown field", in: `{"kind":"tool.invoke","evil":1}`, wantErr: true},
		{name: "trailing", in: `{"kind":"tool.invoke"}{}`, wantErr: true},
		{name: "bad type", in: `{"seq":"x"}`, wantErr: true},
		{name: "oversized", in: `{"kind":"` + strings.Repeat("a", event.MaxEncodedSize) + `"}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeEvent([]byte(tt.in))
			if tt.wantErr != (err != nil) {
				t.Fatalf("DecodeEvent(%.40q) = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, event.ErrInvalid) {
				t.Fatalf("DecodeEvent(%.40q) = %v, want it to wrap event.ErrInvalid", tt.in, err)
			}
		})
	}
}

func TestValidEventID(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{name: "hex", id: NewEventID(), want: true},
		{name: "punct", id: "a-b_c.d:e", want: true},
		{name: "empty", id: "", want: false},
		{name: "space", id: "a b", want: false},
		{name: "newline", id: "a\n", want: false},
		{name: "too long", id: strings.Repeat("a", MaxEventIDLen+1), want: false},
		{name: "max", id: strings.Repeat("a", MaxEventIDLen), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidEventID(tt.id); got != tt.want {
				t.Fatalf("ValidEventID(%q) = %v, want %v", tt.id, got, tt.want)
			}
		})
	}
}

func TestChunkRespectsLimits(t *testing.T) {
	big := strings.Repeat("x", 200<<10)
	var evs []*event.Event
	for range 12 {
		evs = append(evs, &event.Event{V: 1, TS: time.Unix(1, 0), Kind: event.KindToolInvoke, Tool: &event.Tool{Name: "t", IO: event.IO{InputSummary: big}}})
	}
	for range MaxBatch + 10 {
		evs = append(evs, &event.Event{V: 1, TS: time.Unix(1, 0), Kind: event.KindToolInvoke, Tool: &event.Tool{Name: "t"}})
	}
	payloads, _, err := chunk(evs)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range payloads {
		if len(p) > MaxFrame {
			t.Errorf("chunk payload = %d bytes, want <= %d", len(p), MaxFrame)
		}
		req, err := DecodeRequest(p)
		if err != nil {
			t.Fatalf("DecodeRequest(chunk) = %v", err)
		}
		total += len(req.Events)
	}
	if total != len(evs) {
		t.Fatalf("chunk carried %d events, want %d", total, len(evs))
	}
}

// TestClientImportsStayLean keeps the client usable by the shim binary: only
// the standard library, golang.org/x/sys and record/event.
func TestClientImportsStayLean(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		switch {
		case p == "github.com/sandtrail/sandtrail/record/ingest",
			p == "github.com/sandtrail/sandtrail/record/event",
			strings.HasPrefix(p, "golang.org/x/sys/"):
		default:
			t.Errorf("record/ingest depends on %s, want only stdlib, x/sys and record/event", p)
		}
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(frame([]byte(`{"v":1,"events":[{}]}`)))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ReadFrame(bytes.NewReader(b), MaxFrame)
		if err == nil && (len(p) == 0 || len(p) > MaxFrame || len(p) > len(b)-4) {
			t.Fatalf("ReadFrame returned %d bytes from %d input bytes", len(p), len(b))
		}
	})
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"v":1,"events":[{"v":1,"ts":"2026-01-02T03:04:05Z","kind":"pkg.install","source":"kernel","session_id":"b","pkg":{"ecosystem":"npm","name":"x"}}]}`))
	f.Add([]byte(`{"v":1,"events":[{},{"kind":1}]}`))
	f.Add([]byte(`{"v":1,"events":null}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeRequest(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeRequest error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if len(req.Events) == 0 || len(req.Events) > MaxBatch {
			t.Fatalf("DecodeRequest accepted %d events", len(req.Events))
		}
		for _, raw := range req.Events {
			e, err := DecodeEvent(raw)
			if err != nil {
				if !errors.Is(err, event.ErrInvalid) {
					t.Fatalf("DecodeEvent error %v does not wrap event.ErrInvalid", err)
				}
				continue
			}
			_ = e.Validate()
			_, _ = event.Marshal(e)
		}
	})
}

func TestDecodeBatch(t *testing.T) {
	const tool = `{"v":1,"ts":"2026-01-02T03:04:05Z","kind":"tool.invoke","tool":{"name":"x"}}`
	tests := []struct {
		name     string
		in       string
		wantErrs []bool // per event: failed to decode
		wantErr  bool
	}{
		{name: "one", in: `{"v":1,"events":[` + tool + `]}`, wantErrs: []bool{false}},
		{name: "keys in any order", in: `{"events":[` + tool + `],"v":1}`, wantErrs: []bool{false}},
		{name: "bad events isolated", in: `{"v":1,"events":[` + tool + `,"str",{"evil":1},{"seq":"x"},null,` + tool + `]}`,
			wantErrs: []bool{false, true, true, true, false, false}},
		{name: "whitespace", in: " {\n\"v\" : 1 , \"events\" : [ " + tool + " ] }\n", wantErrs: []bool{false}},
		{name: "repeated v", in: `{"v":1,"v":1,"events":[{}]}`, wantErr: true},
		{name: "repeated events", in: `{"v":1,"events":[{}],"events":[{}]}`, wantErr: true},
		{name: "unknown key", in: `{"v":1,"events":[{}],"x":1}`, wantErr: true},
		{name: "missing v", in: `{"events":[{}]}`, wantErr: true},
		{name: "v not a number", in: `{"v":"1","events":[{}]}`, wantErr: true},
		{name: "no events", in: `{"v":1,"events":[]}`, wantErr: true},
		{name: "events not array", in: `{"v":1,"events":{}}`, wantErr: true},
		{name: "syntax error inside event", in: `{"v":1,"events":[{"kind":}]}`, wantErr: true},
		{name: "cut short", in: `{"v":1,"events":[{}`, wantErr: true},
		{name: "trailing data", in: `{"v":1,"events":[{}]}{}`, wantErr: true},
		{name: "array", in: `[1]`, wantErr: true},
		{name: "too many", in: `{"v":1,"events":[` + strings.Repeat(`{},`, MaxBatch) + `{}]}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := DecodeBatch([]byte(tt.in))
			if tt.wantErr {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("DecodeBatch(%.50q) = %v, want ErrMalformed", tt.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeBatch(%.50q) = %v", tt.in, err)
			}
			if b.Len() != len(tt.wantErrs) {
				t.Fatalf("DecodeBatch(%.50q) has %d events, want %d", tt.in, b.Len(), len(tt.wantErrs))
			}
			for i, want := range tt.wantErrs {
				if got := b.Errs[i] != nil; got != want || got != (b.Events[i] == nil) {
					t.Errorf("event %d: err = %v, event = %v, want failed %v", i, b.Errs[i], b.Events[i], want)
				}
				if b.Errs[i] != nil && !errors.Is(b.Errs[i], event.ErrInvalid) {
					t.Errorf("event %d: err = %v, want event.ErrInvalid", i, b.Errs[i])
				}
			}
		})
	}
}

// FuzzDecodeBatch checks the server's one-pass decoder against the
// two-pass DecodeRequest + DecodeEvent: whatever the first accepts, the
// second accepts the same way.
func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte(`{"v":1,"events":[{"v":1,"ts":"2026-01-02T03:04:05Z","kind":"tool.invoke","tool":{"name":"x"}},"s",{"x":1}]}`))
	f.Add([]byte(`{"events":[null],"v":1}`))
	f.Add([]byte(`{"v":1,"events":[{"kind":}]}`))
	f.Add([]byte(`{"v":1,"checks":[{"manager":"npm","ecosystem":"npm","name":"left-pad","spec":"^1.3.0"}]}`))
	f.Add([]byte(`{"v":1,"checks":[],"events":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		batch, err := DecodeBatch(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeBatch error %v does not wrap ErrMalformed", err)
			}
			return
		}
		req, err := DecodeRequest(b)
		if err != nil {
			t.Fatalf("DecodeBatch accepted what DecodeRequest refuses: %v", err)
		}
		if len(req.Checks) != len(batch.Checks) {
			t.Fatalf("DecodeBatch found %d checks, DecodeRequest %d", len(batch.Checks), len(req.Checks))
		}
		if len(req.Events) != batch.Len() {
			t.Fatalf("DecodeBatch found %d events, DecodeRequest %d", batch.Len(), len(req.Events))
		}
		for i, raw := range req.Events {
			_, err := DecodeEvent(raw)
			if (err == nil) != (batch.Errs[i] == nil) {
				t.Fatalf("event %d %q: DecodeBatch error %v, DecodeEvent error %v", i, raw, batch.Errs[i], err)
			}
		}
	})
}
