package event_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

func validEvent() *event.Event {
	return &event.Event{
		V:         event.SchemaVersion,
		TS:        time.Date(2026, 3, 14, 9, 26, 53, 123456789, time.UTC),
		SessionID: "s-1",
		Kind:      "pkg.install",
		Source:    event.SourceShim,
		Pkg:       &event.Pkg{Ecosystem: "npm", Name: "lodash"},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(e *event.Event)
		wantErr string // substring; empty means valid
	}{
		{"valid", func(e *event.Event) {}, ""},
		{"version zero", func(e *event.Event) { e.V = 0 }, "v: unsupported schema version 0"},
		{"version from the future", func(e *event.Event) { e.V = event.SchemaVersion + 1 }, "v: unsupported schema version"},
		{"empty kind", func(e *event.Event) { e.Kind = "" }, "kind: empty"},
		{"kind with space", func(e *event.Event) { e.Kind = "pkg. install" }, "is not category.op"},
		{"kind with newline", func(e *event.Event) { e.Kind = "pkg.install\n" }, "is not category.op"},
		{"kind too long", func(e *event.Event) { e.Kind = "pkg." + strings.Repeat("x", 61) }, "is not category.op"},
		{"unknown category", func(e *event.Event) { e.Kind = "registry.fetch" }, `unknown category "registry"`},
		{"category without op", func(e *event.Event) { e.Kind = "pkg" }, `"pkg" is not category.op`},
		{"missing sub-object", func(e *event.Event) { e.Pkg = nil }, `pkg: required by kind "pkg.install"`},
		{"wrong sub-object", func(e *event.Event) { e.Pkg = nil; e.Proc = &event.Proc{Pid: 1} }, `pkg: required by kind`},
		{"collector needs loss", func(e *event.Event) { e.Kind = "collector.loss" }, `loss: required by kind "collector.loss"`},
		{"capabilities need kernel", func(e *event.Event) {
			e.Kind, e.Source, e.Pkg, e.Loss = event.KindCapabilities, event.SourceKernel, nil, &event.Loss{Count: 1, Source: "x"}
		}, `kernel: required by kind "collector.capabilities"`},
		{"capabilities outside a session", func(e *event.Event) {
			e.Kind, e.Source, e.SessionID, e.Pkg = event.KindCapabilities, event.SourceKernel, "", nil
			e.Kernel = &event.Kernel{Release: "6.1.0", Capabilities: []event.Capability{{Name: event.CapBTF, Have: true}}}
		}, ""},
		{"capability without a name", func(e *event.Event) {
			e.Kind, e.Source, e.SessionID, e.Pkg = event.KindCapabilities, event.SourceKernel, "", nil
			e.Kernel = &event.Kernel{Release: "6.1.0", Capabilities: []event.Capability{{Name: event.CapBTF, Have: true}, {Have: true}}}
		}, "kernel.capabilities[1].name: empty"},
		{"process needs proc", func(e *event.Event) { e.Kind = "process.exec" }, `proc: required by kind`},
		{"bare alert", func(e *event.Event) {
			e.Kind, e.Source, e.Alert = "alert", event.SourceRules, &event.Alert{RuleID: "r", Title: "t", Level: "low"}
		}, ""},
		{"bare alert without alert", func(e *event.Event) { e.Kind = "alert" }, "alert: required by kind"},
		{"extra sub-object allowed", func(e *event.Event) { e.Proc = &event.Proc{Pid: 42} }, ""},
		{"empty source", func(e *event.Event) { e.Source = "" }, `source: unknown ""`},
		{"bad source", func(e *event.Event) { e.Source = "agent" }, `source: unknown "agent"`},
		{"source is case sensitive", func(e *event.Event) { e.Source = "Kernel" }, `source: unknown "Kernel"`},
		{"zero ts", func(e *event.Event) { e.TS = time.Time{} }, "ts: missing"},
		{"missing session from shim", func(e *event.Event) { e.SessionID = "" }, "session_id: missing"},
		{"missing session from api", func(e *event.Event) {
			e.SessionID, e.Source, e.Kind, e.Pkg, e.Tool = "", event.SourceAPI, event.KindToolInvoke, nil, &event.Tool{Name: "bash"}
		}, "session_id: missing"},
		{"pkg from api outside a session", func(e *event.Event) {
			e.SessionID, e.Source, e.Kind = "", event.SourceAPI, event.KindPkgBlocked
			e.Pkg = &event.Pkg{Ecosystem: "npm", Name: "x", Verdict: "block"}
		}, ""},
		{"pkg from a shim needs its session", func(e *event.Event) {
			e.SessionID, e.Source, e.Kind = "", event.SourceShim, event.KindPkgBlocked
			e.Pkg = &event.Pkg{Ecosystem: "npm", Name: "x", Verdict: "block"}
		}, "session_id: missing"},
		{"kernel outside a session", func(e *event.Event) { e.SessionID = ""; e.Source = event.SourceKernel }, ""},
		{"journal outside a session", func(e *event.Event) {
			e.SessionID, e.Source, e.Kind, e.Journal = "", event.SourceJournal, "journal.recovered", &event.Journal{}
		}, ""},
		{"session id too long", func(e *event.Event) { e.SessionID = strings.Repeat("s", 129) }, "session_id: longer than 128 bytes"},
		{"session id at the limit", func(e *event.Event) { e.SessionID = strings.Repeat("s", 128) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := validEvent()
			tt.edit(e)
			err := e.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
			if !errors.Is(err, event.ErrInvalid) {
				t.Errorf("Validate() = %v, want it to wrap ErrInvalid", err)
			}
		})
	}
}

func TestValidateEveryCategory(t *testing.T) {
	// Every category Validate knows has an example, every example is valid,
	// and each becomes invalid without the sub-object its category needs.
	ex := examples()
	seen := map[string]bool{}
	for _, e := range ex {
		seen[e.Category()] = true
		if err := e.Validate(); err != nil {
			t.Errorf("Validate(%s) = %v, want nil", e.Kind, err)
		}
		stripped := *e
		stripped.Proc, stripped.File, stripped.Net, stripped.Pkg, stripped.Tool, stripped.Model = nil, nil, nil, nil, nil, nil
		stripped.Session, stripped.Limit, stripped.Alert, stripped.Loss, stripped.Kernel, stripped.Journal = nil, nil, nil, nil, nil, nil
		stripped.Retention, stripped.Investigate = nil, nil
		if err := stripped.Validate(); err == nil || !strings.Contains(err.Error(), "required by kind") {
			t.Errorf("Validate(%s without sub-objects) = %v, want a required-by-kind error", e.Kind, err)
		}
	}
	for _, c := range event.Categories() {
		if !seen[c] {
			t.Errorf("no example of category %q", c)
		}
	}
}

func TestUnmarshal(t *testing.T) {
	good, err := event.Marshal(validEvent())
	if err != nil {
		t.Fatal(err)
	}
	withField := func(field string) []byte {
		return bytes.Replace(good, []byte(`{"v":1`), []byte(`{`+field+`,"v":1`), 1)
	}
	big := validEvent()
	big.Pkg.Reason = strings.Repeat("x", event.MaxEncodedSize)
	tests := []struct {
		name    string
		in      []byte
		wantErr string
	}{
		{"canonical", good, ""},
		{"surrounding white space", append(append([]byte(" \n\t"), good...), "\n  "...), ""},
		{"empty", nil, "decoding: EOF"},
		{"not json", []byte("pkg.install lodash"), "decoding"},
		{"json array", []byte(`[1,2]`), "decoding"},
		{"null", []byte(`null`), "v: unsupported schema version 0"},
		{"empty object", []byte(`{}`), "v: unsupported schema version 0"},
		{"unknown field", withField(`"agent":"me"`), `unknown field "agent"`},
		{"unknown nested field", bytes.Replace(good, []byte(`"name":"lodash"`), []byte(`"name":"lodash","sha":"x"`), 1), `unknown field "sha"`},
		{"trailing garbage", append(slices.Clone(good), "x"...), "trailing data"},
		{"trailing brace", append(slices.Clone(good), "}"...), "trailing data"},
		{"trailing bracket", append(slices.Clone(good), "]"...), "trailing data"},
		{"second event", append(slices.Clone(good), good...), "trailing data"},
		{"oversized", bytes.Repeat([]byte(" "), event.MaxEncodedSize+1), "exceeds"},
		{"oversized field", []byte(`{"v":1,"pkg":{"reason":"` + big.Pkg.Reason + `"}}`), "exceeds"},
		{"grows past the limit when re-encoded", []byte(`{"v":1,"seq":0,"ts":"2026-03-14T09:26:53Z","session_id":"s-1","kind":"pkg.install","source":"shim","pkg":{"ecosystem":"npm","name":"` + strings.Repeat("<", event.MaxEncodedSize/2) + `"}}`), "re-encoding"},
		{"grows past the limit by invalid UTF-8", []byte(`{"v":1,"seq":0,"ts":"2026-03-14T09:26:53Z","session_id":"s-1","kind":"pkg.install","source":"shim","pkg":{"ecosystem":"npm","name":"` + strings.Repeat("\xff", event.MaxEncodedSize/2) + `"}}`), "re-encoding"},
		{"grows past the limit by empty answers", []byte(`{"v":1,"seq":0,"ts":"2026-03-14T09:26:53Z","session_id":"s-1","kind":"net.dns","source":"kernel","net":{"op":"dns","dns":{"query":"a.","qtype":"A","answers":[` + strings.Repeat("{},", event.MaxEncodedSize/28) + `{}]}}}`), "re-encoding"},
		{"truncated", good[:len(good)-1], "decoding: unexpected EOF"},
		{"wrong type", bytes.Replace(good, []byte(`"seq":0`), []byte(`"seq":"0"`), 1), "decoding"},
		{"negative unsigned", bytes.Replace(good, []byte(`"seq":0`), []byte(`"seq":-1`), 1), "decoding"},
		{"bad time", bytes.Replace(good, []byte(`"ts":"2026-03-14T09:26:53.123456789Z"`), []byte(`"ts":"yesterday"`), 1), "decoding"},
		{"bad version", bytes.Replace(good, []byte(`"v":1`), []byte(`"v":2`), 1), "v: unsupported schema version 2"},
		{"bad source", bytes.Replace(good, []byte(`"source":"shim"`), []byte(`"source":"root"`), 1), `source: unknown "root"`},
		{"missing sub-object", bytes.Replace(good, []byte(`"kind":"pkg.install"`), []byte(`"kind":"tool.invoke"`), 1), `tool: required by kind "tool.invoke"`},
		{"null sub-object", bytes.Replace(good, []byte(`"pkg":{"ecosystem":"npm","name":"lodash"}`), []byte(`"pkg":null`), 1), "pkg: required"},
		{"missing session", bytes.Replace(good, []byte(`"session_id":"s-1"`), []byte(`"session_id":""`), 1), "session_id: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := event.Unmarshal(tt.in)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Unmarshal(%.40q) = %v, want nil", tt.in, err)
				}
				if e == nil {
					t.Fatalf("Unmarshal(%.40q) = nil event, want one", tt.in)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Unmarshal(%.40q) = %v, want error containing %q", tt.in, err, tt.wantErr)
			}
			if !errors.Is(err, event.ErrInvalid) {
				t.Errorf("Unmarshal(%.40q) = %v, want it to wrap ErrInvalid", tt.in, err)
			}
			if e != nil {
				t.Errorf("Unmarshal(%.40q) returned an event with an error", tt.in)
			}
		})
	}
}

func TestMarshal(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(e *event.Event)
		wantErr string
	}{
		{"valid", func(e *event.Event) {}, ""},
		{"argv of 32 KiB fits", func(e *event.Event) {
			e.Proc = &event.Proc{Argv: slices.Repeat([]string{strings.Repeat("a", 1023)}, 32)}
		}, ""},
		{"oversized", func(e *event.Event) { e.Pkg.Reason = strings.Repeat("x", event.MaxEncodedSize) }, "exceeds"},
		{"oversized by escaping", func(e *event.Event) { e.Pkg.Reason = strings.Repeat("\x01", event.MaxEncodedSize/6+1) }, "exceeds"},
		{"unencodable time", func(e *event.Event) { e.TS = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "encoding event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := validEvent()
			tt.edit(e)
			b, err := event.Marshal(e)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Marshal() = %v, want nil", err)
				}
				if len(b) > event.MaxEncodedSize {
					t.Errorf("Marshal() = %d bytes, want at most %d", len(b), event.MaxEncodedSize)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Marshal() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestCanonicalRoundTrip checks Marshal(Unmarshal(Marshal(e))) == Marshal(e)
// for every example, which is what lets the journal re-derive leaf bytes.
func TestCanonicalRoundTrip(t *testing.T) {
	for kind, e := range examples() {
		t.Run(kind, func(t *testing.T) {
			b1, err := event.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			d, err := event.Unmarshal(b1)
			if err != nil {
				t.Fatalf("Unmarshal(Marshal(%s)) = %v", kind, err)
			}
			b2, err := event.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b1, b2) {
				t.Errorf("Marshal(Unmarshal(b)) = %s, want %s", b2, b1)
			}
		})
	}
}

func TestTimestampPrecision(t *testing.T) {
	tests := []struct {
		name string
		ts   time.Time
		want string
	}{
		{"nanoseconds", time.Date(2026, 3, 14, 9, 26, 53, 123456789, time.UTC), `"ts":"2026-03-14T09:26:53.123456789Z"`},
		{"one nanosecond", time.Date(2026, 3, 14, 9, 26, 53, 1, time.UTC), `"ts":"2026-03-14T09:26:53.000000001Z"`},
		{"whole second", time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC), `"ts":"2026-03-14T09:26:53Z"`},
		{"other zone", time.Date(2026, 3, 14, 11, 26, 53, 5, time.FixedZone("", 2*3600)), `"ts":"2026-03-14T11:26:53.000000005+02:00"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := validEvent()
			e.TS = tt.ts
			b, err := event.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(tt.want)) {
				t.Errorf("Marshal(ts %v) = %s, want it to contain %s", tt.ts, b, tt.want)
			}
			d, err := event.Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			if !d.TS.Equal(tt.ts) || d.TS.Nanosecond() != tt.ts.Nanosecond() {
				t.Errorf("Unmarshal(Marshal(ts)).TS = %v, want %v", d.TS, tt.ts)
			}
		})
	}
}

func TestSources(t *testing.T) {
	for _, s := range event.Sources {
		if !s.Valid() {
			t.Errorf("Source(%q).Valid() = false, want true", s)
		}
	}
	for _, s := range []event.Source{"", "Kernel", "agent", "kernel "} {
		if s.Valid() {
			t.Errorf("Source(%q).Valid() = true, want false", s)
		}
	}
}

func TestCategory(t *testing.T) {
	tests := []struct{ kind, want string }{
		{"process.exec", "process"},
		{"alert", "alert"},
		{"net.dns", "net"},
		{"", ""},
		{"a.b.c", "a"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			e := &event.Event{Kind: tt.kind}
			if got := e.Category(); got != tt.want {
				t.Errorf("Category(%q) = %q, want %q", tt.kind, got, tt.want)
			}
		})
	}
	if got := event.Categories(); !slices.IsSorted(got) || len(got) != 13 {
		t.Errorf("Categories() = %v, want the 13 categories sorted", got)
	}
}

func TestDecodeStored(t *testing.T) {
	tests := []struct {
		name, raw, want string // want is the kind, or the error
	}{
		{"an event", `{"v":1,"ts":"2026-11-29T08:00:00Z","kind":"file.read","source":"kernel"}`, "file.read"},
		{"a newer schema's field", `{"v":2,"ts":"2026-11-29T08:00:00Z","kind":"file.read","source":"kernel","later":1}`, "file.read"},
		{"no kind", `{"v":1,"ts":"2026-11-29T08:00:00Z"}`, "decoding event: no kind"},
		{"no ts", `{"v":1,"kind":"file.read"}`, "decoding event: no ts"},
		{"not json", `{`, "decoding event: unexpected end of JSON input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := event.DecodeStored([]byte(tt.raw))
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = e.Kind
			}
			if got != tt.want {
				t.Errorf("DecodeStored(%s) = %q, want %q", tt.raw, got, tt.want)
			}
		})
	}
}
