package index

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
	"github.com/sandtrail/sandtrail/record/query"
)

// retentionRecord is a record with sessions of every sort retention must
// tell apart, 200 days before t0 ("old") or one day before ("new"):
// old-ended ends with a terminate, old-cleaned only with a cleanup,
// old-open never ended, old-held ended and is held, new-ended ended
// recently; and old and new events of no session, with a hold and its
// release of another session among them.
func retentionRecord() []*event.Event {
	old, recent := t0.Add(-200*24*time.Hour), t0.Add(-24*time.Hour)
	var evs []*event.Event
	add := func(at time.Time, sess, kind string, mod func(*event.Event)) {
		ev := &event.Event{V: event.SchemaVersion, TS: at.Add(time.Duration(len(evs)) * time.Second), SessionID: sess, Kind: kind, Source: event.SourceKernel, Host: "h"}
		mod(ev)
		evs = append(evs, ev)
	}
	exec := func(e *event.Event) { e.Proc = &event.Proc{Pid: 7, Comm: "sh", Exe: "/bin/sh"} }
	net := func(e *event.Event) {
		e.Net = &event.Net{Op: "connect", Proto: "tcp", DstIP: "192.0.2.1", DstPort: 443, Domain: "evil.example.com"}
	}
	file := func(e *event.Event) { e.File = &event.File{Op: "read", Path: "/etc/shadow"} }
	lifecycle := func(op string) func(*event.Event) {
		return func(e *event.Event) {
			e.Source = event.SourceSession
			e.Session = &event.Session{Op: op, Reason: "normal"}
		}
	}
	hold := func(kind, sess string) func(*event.Event) {
		return func(e *event.Event) {
			e.Source = event.SourceJournal
			op := event.RetentionHold
			if kind == event.KindRetentionRelease {
				op = event.RetentionRelease
			}
			e.Retention = &event.Retention{Op: op, Session: sess, Reason: "case 7", UID: event.U32(0)}
		}
	}
	caps := func(e *event.Event) { e.Kernel = &event.Kernel{Release: "6.18"} }
	add(old, "", event.KindCapabilities, caps)
	add(old, "", event.KindCapabilities, caps) // the newest before the cutoff: kept
	for _, s := range []string{"old-ended", "old-cleaned", "old-open", "old-held"} {
		add(old, s, event.KindSessionCreate, lifecycle("create"))
		add(old, s, event.KindExec, exec)
		add(old, s, event.KindNetConnect, net)
		add(old, s, event.KindFileRead, file)
	}
	add(old, "old-ended", event.KindSessionTerminate, lifecycle("terminate"))
	add(old, "old-held", event.KindSessionTerminate, lifecycle("terminate"))
	add(old, "old-cleaned", event.KindSessionCleanup, lifecycle("cleanup"))
	add(old, "", event.KindRetentionHold, hold(event.KindRetentionHold, "old-held"))
	add(old, "", event.KindRetentionHold, hold(event.KindRetentionHold, "old-ended"))
	add(old, "", event.KindRetentionRelease, hold(event.KindRetentionRelease, "old-ended"))
	add(recent, "new-ended", event.KindExec, exec)
	add(recent, "new-ended", event.KindSessionTerminate, lifecycle("terminate"))
	add(recent, "", event.KindCapabilities, caps)
	return evs
}

// TestRetentionQueries checks what retention asks of the index on a real
// journal: which sessions ended before the cutoff, the old entries of no
// session, the holds, and that after the journal prunes and the index
// forgets, no query returns a pruned session, catching up still works,
// and a rebuilt index agrees.
func TestRetentionQueries(t *testing.T) {
	ctx := context.Background()
	j, dir := journaltest.Open(t)
	if err := j.Append(ctx, retentionRecord()...); err != nil {
		t.Fatal(err)
	}
	ix, err := OpenCurrent(ctx, filepath.Join(t.TempDir(), "index.db"), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	cutoff := t0.Add(-90 * 24 * time.Hour)
	ended, err := ix.EndedBefore(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range ended {
		ids = append(ids, e.ID)
	}
	if want := []string{"old-ended", "old-held", "old-cleaned"}; !slices.Equal(ids, want) {
		t.Fatalf("EndedBefore() = %v, want %v", ids, want)
	}
	if e := ended[0]; e.Events != 5 || e.First != 2 || e.Reason != "normal" {
		t.Errorf("EndedBefore()[0] = %+v, want 5 events from seq 2, reason normal", e)
	}
	holds, err := ix.Holds(ctx)
	if err != nil || len(holds) != 1 || holds[0].Session != "old-held" || holds[0].Reason != "case 7" || holds[0].UID == nil {
		t.Fatalf("Holds() = %+v, %v, want old-held only (old-ended was released)", holds, err)
	}
	sessionless, err := ix.SessionlessBefore(ctx, cutoff)
	if err != nil || !slices.Equal(sessionless, []uint64{0}) {
		t.Fatalf("SessionlessBefore() = %v, %v, want [0]: the older capabilities, never the newest before the cutoff nor the holds", sessionless, err)
	}
	seqs, err := ix.SessionSeqs(ctx, "old-ended")
	if err != nil || len(seqs) != 5 {
		t.Fatalf("SessionSeqs(old-ended) = %v, %v", seqs, err)
	}
	cleaned, _ := ix.SessionSeqs(ctx, "old-cleaned")
	// The journal prunes, then the index forgets.
	if _, err := journaltest.Prune(t, j, slices.Concat(seqs, cleaned, sessionless)...); err != nil {
		t.Fatal(err)
	}
	n, err := ix.Forget(ctx, Pruned{Seqs: slices.Concat(seqs, cleaned, sessionless), Sessions: []string{"old-ended", "old-cleaned"}})
	if err != nil || n != uint64(len(seqs)+len(cleaned)+1) {
		t.Fatalf("Forget() = %d, %v, want %d events", n, err, len(seqs)+len(cleaned)+1)
	}
	checkForgotten(t, ix, []string{"old-ended", "old-cleaned"})
	// More events; the index catches up past the tombstones.
	if err := j.Append(ctx, &event.Event{SessionID: "later", Kind: event.KindExec, Source: event.SourceKernel, Proc: &event.Proc{Pid: 9}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.CatchUp(ctx, dir); err != nil {
		t.Fatalf("CatchUp() after pruning = %v", err)
	}
	// A rebuilt index holds exactly what the incremental one does.
	rebuilt, err := OpenCurrent(ctx, filepath.Join(t.TempDir(), "rebuilt.db"), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	checkForgotten(t, rebuilt, []string{"old-ended", "old-cleaned"})
	for _, x := range []*Index{ix, rebuilt} {
		st, err := x.Stats(ctx)
		if err != nil || st.Sessions != 4 {
			t.Errorf("Stats() = %+v, %v, want 4 sessions (old-open, old-held, new-ended, later)", st, err)
		}
	}
}

// checkForgotten checks that no question returns the sessions gone.
func checkForgotten(t *testing.T, ix *Index, gone []string) {
	t.Helper()
	ctx := context.Background()
	for _, a := range []query.Args{{}, {Path: "/etc/shadow"}, {Domain: "evil.example.com"}} {
		ss, err := ix.Sessions(ctx, mustParse(t, a))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			if slices.Contains(gone, s.ID) {
				t.Errorf("Sessions(%+v) returns pruned session %s", a, s.ID)
			}
		}
		if len(ss) == 0 {
			t.Errorf("Sessions(%+v) returns nothing; old-open and old-held remain", a)
		}
	}
	for _, id := range gone {
		hits, err := ix.Query(ctx, mustParse(t, query.Args{Session: id}))
		if err != nil || len(hits) != 0 {
			t.Errorf("Query(session %s) = %d hits, %v, want none", id, len(hits), err)
		}
	}
}

// TestCatchUpPrunedLast checks the index's check that it still describes
// the journal when the last entry it indexed was pruned: before and after
// it forgets the entry, and against another journal whose tombstone keeps
// another leaf hash.
func TestCatchUpPrunedLast(t *testing.T) {
	ctx := context.Background()
	evs := func(sess string) []*event.Event {
		var out []*event.Event
		for i := range 3 {
			out = append(out, &event.Event{SessionID: sess, Kind: event.KindExec, Source: event.SourceKernel, Proc: &event.Proc{Pid: int32(i + 1)}})
		}
		return out
	}
	j, dir := journaltest.Open(t)
	if err := j.Append(ctx, evs("a")...); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "index.db")
	ix, err := OpenCurrent(ctx, path, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := journaltest.Prune(t, j, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.CatchUp(ctx, dir); err != nil {
		t.Errorf("CatchUp() with the last indexed entry pruned, not yet forgotten = %v", err)
	}
	if _, err := ix.Forget(ctx, Pruned{Seqs: []uint64{0, 1, 2}, Sessions: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.CatchUp(ctx, dir); err != nil {
		t.Errorf("CatchUp() with the last indexed entry pruned and forgotten = %v", err)
	}
	// Another journal, whose entry 2 is pruned too but was another event.
	other, odir := journaltest.Open(t)
	if err := other.Append(ctx, evs("b")...); err != nil {
		t.Fatal(err)
	}
	if _, err := journaltest.Prune(t, other, 2); err != nil {
		t.Fatal(err)
	}
	ix2, err := OpenCurrent(ctx, filepath.Join(t.TempDir(), "index2.db"), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ix2.Close()
	// ix2 indexed journal a: entries 0 and 1, a's tombstone 2 (not
	// indexed) and the record of its prune, 3, which differs from the
	// other journal's (its time).
	if _, err := ix2.CatchUp(ctx, odir); err == nil {
		t.Errorf("CatchUp() of an index of another journal = nil, want ErrStale")
	}
}

// TestForgetKeepsLaterEvents: a session that got an event after its prune
// was planned (an alert of a re-hunt) keeps that event and its summary;
// only the seqs pruned are forgotten.
func TestForgetKeepsLaterEvents(t *testing.T) {
	ctx := context.Background()
	j, dir := journaltest.Open(t)
	evs := retentionRecord()
	if err := j.Append(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	ix, err := OpenCurrent(ctx, filepath.Join(t.TempDir(), "index.db"), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	seqs, err := ix.SessionSeqs(ctx, "old-ended")
	if err != nil {
		t.Fatal(err)
	}
	late := &event.Event{SessionID: "old-ended", Kind: event.KindAlert, Source: event.SourceRules,
		Alert: &event.Alert{RuleID: "known_malicious", Title: "t", Level: "high"}}
	if err := j.Append(ctx, late); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.CatchUp(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := journaltest.Prune(t, j, seqs...); err != nil {
		t.Fatal(err)
	}
	if n, err := ix.Forget(ctx, Pruned{Seqs: seqs, Sessions: []string{"old-ended"}}); err != nil || n != uint64(len(seqs)) {
		t.Fatalf("Forget() = %d, %v", n, err)
	}
	hits, err := ix.Query(ctx, mustParse(t, query.Args{Session: "old-ended"}))
	if err != nil || len(hits) != 1 || hits[0].Seq != late.Seq {
		t.Fatalf("Query(old-ended) = %v, %v, want only the late alert %d", hits, err, late.Seq)
	}
	ss, err := ix.Sessions(ctx, mustParse(t, query.Args{Session: "old-ended"}))
	if err != nil || len(ss) != 1 {
		t.Errorf("Sessions(old-ended) = %v, %v, want its summary kept", ss, err)
	}
}
