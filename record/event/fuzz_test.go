package event_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// FuzzUnmarshal feeds untrusted bytes to Unmarshal. It must never panic, it
// must fail only with ErrInvalid, and whatever it accepts must re-encode
// within MaxEncodedSize and decode back to the same value and the same
// canonical bytes. The seed corpus in testdata/fuzz/FuzzUnmarshal holds one
// valid event per kind (valid-*, written by TestExamplesGolden -update),
// broken ones (broken-*) and odd but acceptable ones (odd-*).
func FuzzUnmarshal(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := event.Unmarshal(b)
		if err != nil {
			if !errors.Is(err, event.ErrInvalid) {
				t.Fatalf("Unmarshal(%q) = %v, want an error wrapping ErrInvalid", b, err)
			}
			if e != nil {
				t.Fatalf("Unmarshal(%q) returned an event together with %v", b, err)
			}
			return
		}
		b1, err := event.Marshal(e)
		if err != nil {
			t.Fatalf("Marshal(Unmarshal(%q)) = %v, want the accepted event to re-encode", b, err)
		}
		e2, err := event.Unmarshal(b1)
		if err != nil {
			t.Fatalf("Unmarshal(Marshal(Unmarshal(%q))) = %v, want nil", b, err)
		}
		if !sameEvent(e, e2) {
			t.Fatalf("Unmarshal(Marshal(e)) = %+v, want %+v", e2, e)
		}
		b2, err := event.Marshal(e2)
		if err != nil {
			t.Fatalf("Marshal(e2) = %v", err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("canonical encoding not stable: %s then %s", b1, b2)
		}
	})
}

// sameEvent reports whether a and b are the same value. Times are the same
// when they are the same instant written with the same offset: decoding
// "+00:00" may yield time.Local where "Z" yields time.UTC, which
// reflect.DeepEqual would tell apart.
func sameEvent(a, b *event.Event) bool {
	ac, bc := *a, *b
	if !sameTime(ac.TS, bc.TS) {
		return false
	}
	ac.TS, bc.TS = time.Time{}, time.Time{}
	if ac.Proc != nil && bc.Proc != nil {
		ap, bp := *ac.Proc, *bc.Proc
		if !sameTime(ap.StartTS, bp.StartTS) {
			return false
		}
		ap.StartTS, bp.StartTS = time.Time{}, time.Time{}
		ac.Proc, bc.Proc = &ap, &bp
	}
	return reflect.DeepEqual(ac, bc)
}

func sameTime(a, b time.Time) bool {
	_, ao := a.Zone()
	_, bo := b.Zone()
	return a.Equal(b) && ao == bo && a.IsZero() == b.IsZero()
}

// TestFuzzSeedsClassified keeps the seed corpus honest: every valid-* and
// odd-* seed is accepted by Unmarshal, every broken-* seed is rejected, and
// every valid-* seed also conforms to docs/event.schema.json.
func TestFuzzSeedsClassified(t *testing.T) {
	schema := loadSchema(t)
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzUnmarshal", "*"))
	if err != nil || len(files) < 40 {
		t.Fatalf("found %d seeds (err %v), want at least 40", len(files), err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b := decodeSeed(t, raw)
			_, err = event.Unmarshal(b)
			switch {
			case strings.HasPrefix(name, "broken-"):
				if err == nil {
					t.Errorf("Unmarshal(%s) = nil error, want rejection", name)
				}
			case strings.HasPrefix(name, "valid-"), strings.HasPrefix(name, "odd-"), strings.HasPrefix(name, "found-"):
				if err != nil {
					t.Errorf("Unmarshal(%s) = %v, want acceptance", name, err)
				}
				if strings.HasPrefix(name, "valid-") {
					if err := validate(schema, decodeInstance(t, b), "event"); err != nil {
						t.Errorf("validate(%s) = %v, want nil", name, err)
					}
				}
			default:
				t.Errorf("seed %s is not named valid-, odd-, found- or broken-", name)
			}
		})
	}
}

// decodeSeed reads a "go test fuzz v1" file holding one []byte value.
func decodeSeed(t *testing.T, raw []byte) []byte {
	t.Helper()
	header, body, ok := strings.Cut(string(raw), "\n")
	if !ok || header != "go test fuzz v1" {
		t.Fatalf("not a fuzz corpus file: %.40q", raw)
	}
	body = strings.TrimSpace(body)
	if !strings.HasPrefix(body, "[]byte(") || !strings.HasSuffix(body, ")") {
		t.Fatalf("corpus value is not a []byte: %.40q", body)
	}
	s, err := strconv.Unquote(body[len("[]byte(") : len(body)-1])
	if err != nil {
		t.Fatalf("unquoting corpus value: %v", err)
	}
	return []byte(s)
}

// FuzzDecodeStored feeds a damaged or hostile journal's bytes to
// DecodeStored. It must never panic; what it accepts has a kind and a
// time, and its canonical encoding decodes back to the same kind, session
// and time.
func FuzzDecodeStored(f *testing.F) {
	f.Add([]byte(`{"v":1,"ts":"2026-11-29T08:00:00Z","session_id":"s","kind":"file.read","source":"kernel","file":{"op":"read","path":"/etc/ssh/x"}}`))
	f.Add([]byte(`{"v":9,"ts":"2026-11-29T08:00:00Z","kind":"pkg.install","source":"shim","from_a_newer_schema":{"x":1}}`))
	f.Add([]byte(`{"kind":"x"}`))
	f.Add([]byte(`{"ts":"2026-11-29T08:00:00Z"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := event.DecodeStored(b)
		if err != nil {
			if e != nil {
				t.Fatalf("DecodeStored(%q) returned an event together with %v", b, err)
			}
			return
		}
		if e.Kind == "" || e.TS.IsZero() {
			t.Fatalf("DecodeStored(%q) = kind %q ts %v, want both set", b, e.Kind, e.TS)
		}
		b1, err := json.Marshal(e)
		if err != nil {
			return // a value json cannot encode back (a time past year 9999)
		}
		e2, err := event.DecodeStored(b1)
		if err != nil {
			t.Fatalf("DecodeStored(encoding of DecodeStored(%q)) = %v", b, err)
		}
		if e2.Kind != e.Kind || e2.SessionID != e.SessionID || !e2.TS.Equal(e.TS) {
			t.Fatalf("DecodeStored round trip of %q = %q %q %v, want %q %q %v", b, e2.Kind, e2.SessionID, e2.TS, e.Kind, e.SessionID, e.TS)
		}
	})
}
