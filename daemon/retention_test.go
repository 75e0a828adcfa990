package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
	"github.com/sandtrail/sandtrail/record/query"
)

// retentionNow is the clock of the retention tests.
var retentionNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// sessionEvents are the events of a session of n execs that ended at end
// (terminate and cleanup), or that is still running when end is zero and
// began at begin.
func sessionEvents(id string, begin, end time.Time, n int) []*event.Event {
	evs := []*event.Event{{TS: begin, SessionID: id, Kind: event.KindSessionCreate, Source: event.SourceSession,
		Session: &event.Session{Op: "create"}}}
	for i := range n {
		evs = append(evs, &event.Event{TS: begin.Add(time.Duration(i+1) * time.Second), SessionID: id, Kind: event.KindExec,
			Source: event.SourceKernel, Proc: &event.Proc{Pid: int32(100 + i), Comm: "sh", Exe: "/bin/sh"}})
	}
	if !end.IsZero() {
		evs = append(evs, &event.Event{TS: end, SessionID: id, Kind: event.KindSessionTerminate, Source: event.SourceSession,
			Session: &event.Session{Op: "terminate", Reason: "normal", ExitStatus: event.I32(0)}},
			&event.Event{TS: end.Add(time.Second), SessionID: id, Kind: event.KindSessionCleanup, Source: event.SourceSession,
				Session: &event.Session{Op: "cleanup", FSState: "deleted"}})
	}
	return evs
}

// retentionJournal is a journal with sessions on both sides of a 90-day
// window, interleaved: old-a and old-b ended 200 days ago, old-open began
// then and never ended, new ended yesterday; and the host's events of no
// session, two old and one new. It returns the journal, its directory,
// its verifiers and its index.
func retentionJournal(t *testing.T) (*journal.Journal, string, note.Verifiers, *index.Index) {
	t.Helper()
	ctx := context.Background()
	s, v := journaltest.Keys(t, "retention")
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := journal.Open(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	old, recent := retentionNow.Add(-200*24*time.Hour), retentionNow.Add(-24*time.Hour)
	host := func(at time.Time) *event.Event {
		return &event.Event{TS: at, Kind: event.KindCapabilities, Source: event.SourceKernel, Kernel: &event.Kernel{Release: "6.18"}}
	}
	a, b := sessionEvents("old-a", old, old.Add(time.Hour), 5), sessionEvents("old-b", old.Add(time.Minute), old.Add(2*time.Hour), 3)
	var evs []*event.Event
	// Two old capabilities: the newer still describes the collector of
	// the sessions since, and is kept.
	evs = append(evs, host(old.Add(-time.Hour)), host(old))
	for i := range max(len(a), len(b)) { // interleaved, as sessions run side by side
		if i < len(a) {
			evs = append(evs, a[i])
		}
		if i < len(b) {
			evs = append(evs, b[i])
		}
	}
	evs = append(evs, sessionEvents("old-open", old, time.Time{}, 2)...)
	evs = append(evs, sessionEvents("new", recent, recent.Add(time.Hour), 2)...)
	evs = append(evs, host(recent))
	if err := j.Append(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	ix, err := index.OpenCurrent(ctx, filepath.Join(t.TempDir(), "index.db"), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return j, dir, v, ix
}

func reportIDs(ss []control.RetentionSession) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

// TestRetentionApply: a dry run lists what would go and changes nothing;
// a hold keeps its session, listed as held; apply prunes the rest from
// the index and the journal, which still verifies, and journals the
// prune; after a release, the next apply prunes the held session too.
func TestRetentionApply(t *testing.T) {
	ctx := context.Background()
	j, dir, v, ix := retentionJournal(t)
	r := &Retention{Journal: j, Index: ix, HotDays: 90, Host: "h", Now: func() time.Time { return retentionNow }}
	if _, err := r.Hold(ctx, "old-b", "case 7", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Hold(ctx, "old-b", "again", 0); err == nil {
		t.Error("Hold() of a held session = nil, want an error")
	}
	if _, err := r.Hold(ctx, "no-such", "x", 0); err == nil {
		t.Error("Hold() of an unknown session = nil, want an error")
	}
	if _, err := r.Hold(ctx, "old-a", "", 0); err == nil {
		t.Error("Hold() without a reason = nil, want an error")
	}
	size := j.Size()
	seg := readSegments(t, dir)
	dry, err := r.Apply(ctx, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := reportIDs(dry.Sessions); !slices.Equal(got, []string{"old-a"}) || !slices.Equal(reportIDs(dry.Held), []string{"old-b"}) {
		t.Fatalf("dry run: sessions %v, held %v, want [old-a] and [old-b]", got, reportIDs(dry.Held))
	}
	if s := dry.Sessions[0]; s.Entries != 8 || len(s.Ranges) < 2 || dry.Sessionless != 1 || dry.Entries != 9 || dry.Held[0].Hold == nil {
		t.Errorf("dry run = %+v, want old-a's 8 entries in interleaved ranges, 1 sessionless, the hold", dry)
	}
	if j.Size() != size || !slices.Equal(readSegments(t, dir), seg) {
		t.Fatal("the dry run changed the journal")
	}
	if hits := sessionHits(t, ix, "old-a"); hits != 8 {
		t.Fatalf("the dry run changed the index: %d events of old-a", hits)
	}
	rep, err := r.Apply(ctx, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Journal == nil || rep.Journal.Pruned != 9 || rep.Forgotten != 9 || len(rep.Events) != 1 {
		t.Fatalf("Apply() = %+v, want 9 entries pruned and forgotten, one prune event", rep)
	}
	checkPruned(t, dir, v, ix, rep, []string{"old-a"})
	if hits := sessionHits(t, ix, "old-b"); hits != 6 {
		t.Errorf("held session old-b has %d events in the index, want 6", hits)
	}
	if err := r.Release(ctx, "old-b", "case closed", 0); err != nil {
		t.Fatal(err)
	}
	if err := r.Release(ctx, "old-b", "twice", 0); err == nil {
		t.Error("Release() of a session not held = nil, want an error")
	}
	rep, err = r.Apply(ctx, false, 0)
	if err != nil || !slices.Equal(reportIDs(rep.Sessions), []string{"old-b"}) || len(rep.Held) != 0 {
		t.Fatalf("Apply() after the release = %+v, %v, want old-b pruned", rep, err)
	}
	checkPruned(t, dir, v, ix, rep, []string{"old-a", "old-b"})
	if rep, err := r.Apply(ctx, false, 0); err != nil || rep.Entries != 0 || len(rep.Events) != 0 {
		t.Errorf("a third Apply() = %+v, %v, want nothing to prune", rep, err)
	}
}

// TestRetentionArchiveFails: a session whose archiving fails is not
// pruned, and is reported as failed; the others are.
func TestRetentionArchiveFails(t *testing.T) {
	ctx := context.Background()
	j, dir, v, ix := retentionJournal(t)
	var archived []string
	r := &Retention{Journal: j, Index: ix, HotDays: 90, Now: func() time.Time { return retentionNow },
		Archive: func(_ context.Context, id string, _ []uint64) error {
			archived = append(archived, id)
			if id == "old-b" {
				return errors.New("registry unreachable")
			}
			return nil
		}}
	rep, err := r.Apply(ctx, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(archived, []string{"old-a", "old-b"}) || !slices.Equal(reportIDs(rep.Sessions), []string{"old-a"}) ||
		!slices.Equal(reportIDs(rep.Failed), []string{"old-b"}) || !strings.Contains(rep.Failed[0].Error, "unreachable") {
		t.Fatalf("Apply() = %+v (archived %v), want old-a pruned and old-b failed", rep, archived)
	}
	checkPruned(t, dir, v, ix, rep, []string{"old-a"})
	if hits := sessionHits(t, ix, "old-b"); hits != 6 {
		t.Errorf("old-b, whose archiving failed, has %d events in the index, want 6", hits)
	}
	if _, err := (&Retention{Journal: j, Index: ix}).Apply(ctx, false, 0); !errors.Is(err, ErrRetentionOff) {
		t.Errorf("Apply() with hot_days 0 = %v, want ErrRetentionOff", err)
	}
}

// checkPruned checks that the sessions gone are gone from the index and
// the journal, which verifies with the entries pruned counted, and that
// the report's last prune event records them.
func checkPruned(t *testing.T, dir string, v note.Verifiers, ix *index.Index, rep *control.RetentionReport, gone []string) {
	t.Helper()
	for _, id := range gone {
		if hits := sessionHits(t, ix, id); hits != 0 {
			t.Errorf("the index still returns %d events of pruned session %s", hits, id)
		}
	}
	vr, err := journal.Verify(dir, v, nil, journal.DecodeEvents())
	if err != nil || vr.Status == journal.StatusTampered || vr.Pruned == 0 {
		t.Fatalf("Verify() after the prune = %+v, %v, want it to pass with pruned entries", vr, err)
	}
	if len(rep.Events) == 0 {
		return
	}
	raw, err := journal.Entry(dir, rep.Events[len(rep.Events)-1])
	if err != nil {
		t.Fatal(err)
	}
	e, err := event.DecodeStored(raw)
	if err != nil || e.Kind != event.KindRetentionPrune || e.SessionID != "" || e.Retention.HotDays != 90 ||
		e.Retention.UID == nil || *e.Retention.UID != 0 || len(e.Retention.Ranges) == 0 {
		t.Fatalf("prune event = %+v, %v", e, err)
	}
	var n uint64
	for _, rg := range e.Retention.Ranges {
		n += rg.Last - rg.First + 1
		for s := rg.First; s <= rg.Last; s++ {
			if _, err := journal.Entry(dir, s); !errors.Is(err, journal.ErrPruned) {
				t.Errorf("seq %d, in the prune event's ranges, is not pruned: %v", s, err)
			}
		}
	}
	if n != e.Retention.Entries {
		t.Errorf("prune event ranges hold %d seqs, entries says %d", n, e.Retention.Entries)
	}
}

// sessionHits counts the index's events of a session.
func sessionHits(t *testing.T, ix *index.Index, id string) int {
	t.Helper()
	f, err := query.Parse(query.Args{Session: id}, retentionNow)
	if err != nil {
		t.Fatal(err)
	}
	hits, err := ix.Query(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return len(hits)
}

// readSegments reads the journal's segment files, concatenated.
func readSegments(t *testing.T, dir string) []byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// retainer serves a Retention on the control socket, as the daemon does.
type retainer struct {
	control.Daemon
	r *Retention
}

func (d retainer) ApplyRetention(ctx context.Context, dryRun bool, uid uint32) (*control.RetentionReport, error) {
	return d.r.Apply(ctx, dryRun, uid)
}

func (d retainer) Hold(ctx context.Context, s, why string, uid uint32) (*index.Hold, error) {
	return d.r.Hold(ctx, s, why, uid)
}

func (d retainer) Release(ctx context.Context, s, why string, uid uint32) error {
	return d.r.Release(ctx, s, why, uid)
}

func (d retainer) Holds(ctx context.Context) ([]index.Hold, error) { return d.r.Holds(ctx) }

// noSessions is a session table with no sessions, for the attribution
// of the control socket's peers.
type noSessions struct{}

func (noSessions) Lookup(uint64) (string, bool) { return "", false }

// TestRetentionControlSocket drives retention through the control
// socket: the hold records the peer's uid from its credentials, the list
// shows it, a dry run keeps the held session, and apply prunes after the
// release.
func TestRetentionControlSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the control socket serves only uid 0")
	}
	j, dir, v, ix := retentionJournal(t)
	r := &Retention{Journal: j, Index: ix, HotDays: 90, Now: func() time.Time { return retentionNow }}
	path := filepath.Join(t.TempDir(), "control.sock")
	ln, err := control.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	c := control.Serve(ln, retainer{r: r}, attribution.New(noSessions{}), hclog.NewNullLogger())
	defer c.Close()
	resp, err := control.Call(path, &control.Request{Op: control.OpHold, Session: "old-a", Reason: "case 9"})
	if err != nil || len(resp.Holds) != 1 || resp.Holds[0].UID == nil || *resp.Holds[0].UID != 0 || resp.Holds[0].Actor == "" {
		t.Fatalf("hold = %+v, %v, want the hold with uid 0 from the peer's credentials", resp, err)
	}
	resp, err = control.Call(path, &control.Request{Op: control.OpHolds})
	if err != nil || len(resp.Holds) != 1 || resp.Holds[0].Session != "old-a" || resp.Holds[0].Reason != "case 9" {
		t.Fatalf("holds = %+v, %v", resp, err)
	}
	if _, err := control.Call(path, &control.Request{Op: control.OpRelease, Session: "old-b", Reason: "x"}); err == nil {
		t.Error("release of a session not held = nil error")
	}
	resp, err = control.Call(path, &control.Request{Op: control.OpRetention, DryRun: true})
	if err != nil || resp.Retention == nil || !resp.Retention.DryRun || !slices.Equal(reportIDs(resp.Retention.Held), []string{"old-a"}) {
		t.Fatalf("retention dry run = %+v, %v", resp, err)
	}
	if _, err := control.Call(path, &control.Request{Op: control.OpRelease, Session: "old-a", Reason: "closed"}); err != nil {
		t.Fatal(err)
	}
	resp, err = control.Call(path, &control.Request{Op: control.OpRetention})
	if err != nil || resp.Retention == nil || !slices.Equal(reportIDs(resp.Retention.Sessions), []string{"old-a", "old-b"}) {
		t.Fatalf("retention = %+v, %v, want old-a and old-b pruned", resp, err)
	}
	checkPruned(t, dir, v, ix, resp.Retention, []string{"old-a", "old-b"})
	var kinds []string
	if err := journal.Scan(dir, 0, func(_ uint64, raw []byte) error {
		e, err := event.DecodeStored(raw)
		if err == nil && e.Retention != nil {
			kinds = append(kinds, e.Kind)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{event.KindRetentionHold, event.KindRetentionRelease, event.KindRetentionPrune}
	if !slices.Equal(kinds, want) {
		t.Errorf("retention events journaled = %v, want %v", kinds, want)
	}
}

// TestRetentionWaitsForSinks: what a sink has yet to send (at or past the
// lowest cursor) is not pruned: a session with such an entry is reported
// unsent, and goes once the sinks have sent it.
func TestRetentionWaitsForSinks(t *testing.T) {
	ctx := context.Background()
	j, dir, v, ix := retentionJournal(t)
	seqsA, err := ix.SessionSeqs(ctx, "old-a")
	if err != nil || len(seqsA) == 0 {
		t.Fatalf("old-a's seqs = %v, %v", seqsA, err)
	}
	cursor := slices.Max(seqsA) // old-a's last entry is not sent yet
	r := &Retention{Journal: j, Index: ix, HotDays: 90, Now: func() time.Time { return retentionNow },
		Unsent: func() (uint64, error) { return cursor, nil }}
	rep, err := r.Apply(ctx, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reportIDs(rep.Sessions), []string{"old-b"}) || !slices.Equal(reportIDs(rep.Unsent), []string{"old-a"}) {
		t.Fatalf("Apply() with the sinks at %d = sessions %v, unsent %v; want old-b pruned, old-a unsent",
			cursor, reportIDs(rep.Sessions), reportIDs(rep.Unsent))
	}
	checkPruned(t, dir, v, ix, rep, []string{"old-b"})
	if hits := sessionHits(t, ix, "old-a"); hits == 0 {
		t.Error("old-a, not yet sent by every sink, is gone from the index")
	}
	cursor = j.Size()
	if rep, err = r.Apply(ctx, false, 0); err != nil || !slices.Equal(reportIDs(rep.Sessions), []string{"old-a"}) || len(rep.Unsent) != 0 {
		t.Fatalf("Apply() once the sinks sent everything = %+v, %v; want old-a pruned", rep, err)
	}
	r.Unsent = func() (uint64, error) { return 0, errors.New("cursor unreadable") }
	if _, err := r.Apply(ctx, true, 0); err == nil || !strings.Contains(err.Error(), "sinks' cursors") {
		t.Errorf("Apply() with an unreadable cursor = %v, want an error naming the sinks' cursors", err)
	}
}

// TestSinkCursors: the Unsent hook of a config is the lowest stored cursor
// of its sinks, 0 for a sink that stored none, an error for one that
// cannot be read, and nil with no sinks.
func TestSinkCursors(t *testing.T) {
	c := &Config{DataDir: t.TempDir(), Sinks: []SinkConfig{{Name: "a"}, {Name: "b"}}}
	if err := os.MkdirAll(c.SinksDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(c.SinksDir(), name+".cursor"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	low := c.SinkCursors()
	write("a", "9\n")
	if n, err := low(); err != nil || n != 0 {
		t.Errorf("with b's cursor not stored = %d, %v, want 0", n, err)
	}
	write("b", "4\n")
	if n, err := low(); err != nil || n != 4 {
		t.Errorf("with cursors 9 and 4 = %d, %v, want 4", n, err)
	}
	write("b", "four\n")
	if _, err := low(); err == nil {
		t.Error("an unreadable cursor = nil error")
	}
	if (&Config{}).SinkCursors() != nil {
		t.Error("SinkCursors with no sinks is not nil")
	}
}
