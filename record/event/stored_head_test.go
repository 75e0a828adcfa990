package event_test

import (
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// TestStoredHead: the kind and time of a stored entry, read without
// decoding the rest; an entry without them is an error, as for
// DecodeStored.
func TestStoredHead(t *testing.T) {
	ts := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	raw, err := event.Marshal(&event.Event{V: event.SchemaVersion, TS: ts, SessionID: "s", Kind: event.KindExec,
		Source: event.SourceKernel, Proc: &event.Proc{Pid: 1}})
	if err != nil {
		t.Fatal(err)
	}
	kind, got, err := event.StoredHead(raw)
	if err != nil || kind != event.KindExec || !got.Equal(ts) {
		t.Errorf("StoredHead = %q, %v, %v; want process.exec, %v", kind, got, err, ts)
	}
	for _, bad := range []string{`{}`, `{"kind":"x"}`, `{"ts":"2026-12-02T10:00:00Z"}`, `not json`} {
		if _, _, err := event.StoredHead([]byte(bad)); err == nil {
			t.Errorf("StoredHead(%s) = nil error", bad)
		}
	}
}
