package sink

import (
	"bytes"
	"strings"
	"testing"
)

func TestCheckpoints(t *testing.T) {
	in := `{"seq":0}
{"sandtrail_checkpoint":{"size":4,"note":"a\n4\nr\n\n— s x\n"}}
{"seq":1}
{"sandtrail_checkpoint":{"size":9,"note":"a\n9\nr\n\n— s y\n"}}
{"sandtrail_checkpoint":{"size":4,"note":"a\n4\nr\n\n— s x\n"}}
`
	got, err := Checkpoints(strings.NewReader(in))
	if err != nil || len(got) != 2 || !bytes.Contains(got[0], []byte("\n9\n")) {
		t.Fatalf("Checkpoints = %q, %v; want the notes of sizes 9 and 4, newest first", got, err)
	}
	for _, bad := range []string{`{"sandtrail_checkpoint":{"size":1}}`, `{"sandtrail_checkpoint":`} {
		if _, err := Checkpoints(strings.NewReader(bad)); err == nil {
			t.Errorf("Checkpoints(%q) = nil error", bad)
		}
	}
}

// FuzzCheckpoints: an export is untrusted bytes; reading one never panics.
func FuzzCheckpoints(f *testing.F) {
	f.Add([]byte(`{"sandtrail_checkpoint":{"size":4,"note":"a\n4\nr\n\n— s x\n"}}` + "\n{\"seq\":3}\n"))
	f.Add([]byte(`{"sandtrail_checkpoint":{"size":-1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cps, err := Checkpoints(bytes.NewReader(b))
		if err == nil && len(cps) > maxHeld {
			t.Fatalf("%d checkpoints, more than %d", len(cps), maxHeld)
		}
	})
}
