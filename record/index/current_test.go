package index

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
	"github.com/sandtrail/sandtrail/record/query"
)

// TestOpenCurrent: OpenCurrent returns an index caught up with the journal,
// and rebuilds one of another schema version, or one that describes
// another journal, from the journal; without a journal it fails with
// ErrNoJournal.
func TestOpenCurrent(t *testing.T) {
	ctx := context.Background()
	fill := func(evs []*event.Event) string {
		j, dir := journaltest.Open(t, journal.WithSegmentSize(256<<10))
		for _, ev := range evs {
			c := *ev
			if err := j.Append(ctx, &c); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	open := func(path, dir string) uint64 {
		t.Helper()
		ix, err := OpenCurrent(ctx, path, dir)
		if err != nil {
			t.Fatalf("OpenCurrent(%s) = %v", dir, err)
		}
		st, err := ix.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ix.Close()
		return st.Events
	}
	all := handcrafted()
	dir := fill(all)
	path := filepath.Join(t.TempDir(), "index.db")
	if n := open(path, dir); n != uint64(len(all)) {
		t.Errorf("OpenCurrent(new) indexed %d events, want %d", n, len(all))
	}
	// Another schema version is rebuilt.
	setSchemaVersion(t, path, 99)
	if n := open(path, dir); n != uint64(len(all)) {
		t.Errorf("OpenCurrent(old schema) indexed %d events, want %d", n, len(all))
	}
	// A shorter journal in its place is stale: the index is rebuilt from it.
	short := fill(all[:3])
	if n := open(path, short); n != 3 {
		t.Errorf("OpenCurrent(shorter journal) indexed %d events, want 3", n)
	}
	if _, err := OpenCurrent(ctx, path, filepath.Join(t.TempDir(), "nope")); !errors.Is(err, ErrNoJournal) {
		t.Errorf("OpenCurrent(no journal) = %v, want ErrNoJournal", err)
	}
}

// TestEachEvent: EachEvent decodes each hit once (event.DecodeStored),
// with the seq the index holds it at.
func TestEachEvent(t *testing.T) {
	ctx := context.Background()
	ix := openTemp(t)
	evs := handcrafted()
	if err := ix.Add(ctx, entries(t, evs)); err != nil {
		t.Fatal(err)
	}
	var hits []Hit
	if err := ix.Each(ctx, query.Filter{}, func(h Hit) error { hits = append(hits, h); return nil }); err != nil {
		t.Fatal(err)
	}
	i := 0
	err := ix.EachEvent(ctx, query.Filter{}, func(e *event.Event) error {
		if h := hits[i]; e.Seq != h.Seq || e.Kind != h.Kind || e.SessionID != h.SessionID || !e.TS.Equal(h.TS) {
			t.Errorf("event %d = seq %d %s %s %v, want the hit's %d %s %s %v", i, e.Seq, e.Kind, e.SessionID, e.TS, h.Seq, h.Kind, h.SessionID, h.TS)
		}
		i++
		return nil
	})
	if err != nil || i != len(hits) || i == 0 {
		t.Errorf("EachEvent = %d events, %v; want the %d hits", i, err, len(hits))
	}
}

// setSchemaVersion opens (or creates) the index at path and marks it as
// written by schema version v.
func setSchemaVersion(t *testing.T, path string, v int) {
	t.Helper()
	ix, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := ix.db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v)); err != nil {
		t.Fatal(err)
	}
}
