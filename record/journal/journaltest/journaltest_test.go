package journaltest

import (
	"context"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
)

// TestKeys checks that the verifiers from Keys accept what its signer
// signs, and that two calls give different keys.
func TestKeys(t *testing.T) {
	s, v := Keys(t, "journaltest")
	msg, err := note.Sign(&note.Note{Text: "hello\n"}, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(msg, v); err != nil {
		t.Errorf("note.Open(signed by Keys) = %v, want it verified", err)
	}
	_, other := Keys(t, "journaltest")
	if _, err := note.Open(msg, other); err == nil {
		t.Errorf("note.Open with another Keys() verifier = nil error, want unverified")
	}
}

// TestOpen appends to a journal from Open and reads the events back from
// its directory.
func TestOpen(t *testing.T) {
	j, dir := Open(t, journal.WithSegmentSize(64<<10))
	const n = 3
	for i := range n {
		e := &event.Event{V: event.SchemaVersion, TS: time.Now(), SessionID: "s", Kind: event.KindExec,
			Source: event.SourceKernel, Proc: &event.Proc{Pid: int32(i + 1)}}
		if err := j.Append(context.Background(), e); err != nil {
			t.Fatalf("Append() = %v", err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	got := 0
	if err := journal.Scan(dir, 0, func(uint64, []byte) error { got++; return nil }); err != nil || got < n {
		t.Errorf("Scan(%s) = %d entries, %v, want at least %d", dir, got, err, n)
	}
}
