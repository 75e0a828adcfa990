package pkgview

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// scenarios is a record of several sessions, each with something for a
// rule, interleaved as the journal would hold them.
func scenarios() (all []*event.Event, bySession map[string][]*event.Event) {
	a, b, c := newRec("A"), newRec("B"), newRec("C")
	a.fetch("npm", "lodash", "4.17.21", sriA, "served")
	b.spawn(10, 1, "/usr/bin/npm", "/w", "/usr/bin/env", "node", "/usr/bin/npm", "install")
	b.exec(10, 1, "/usr/bin/node", "/w", "node", "/usr/bin/npm", "install")
	a.install("npm", "lodash", "4.17.21", sriB, 11)
	c.install("pypi", "a", "2.0", shaA, 11)
	b.spawn(11, 10, "/usr/bin/npm", "/w", "npm", "install")
	c.fetch("pypi", "a", "1.0", shaB, "served")
	a.spawn(20, 1, testShimDir+"/pip", "/w", "pip", "install", "x")
	a.spawn(21, 20, "/usr/bin/pip", "/w", "/usr/bin/python3", "/usr/bin/pip", "install", "x")
	c.spawn(30, 1, "/usr/bin/python3", "/w", "python3", "-m", "pip", "install", "x")
	a.fetch("npm", "x", "1.0.0", sriA, "served")
	a.install("npm", "x", "1.0.0", sriA, 11)
	recs := []*rec{a, b, c}
	bySession = map[string][]*event.Event{}
	// Interleave round robin, renumbering seqs as one journal would.
	for i := 0; ; i++ {
		more := false
		for _, r := range recs {
			if i < len(r.evs) {
				more = true
				e := r.evs[i]
				e.Seq = uint64(len(all))
				all = append(all, e)
				bySession[e.SessionID] = append(bySession[e.SessionID], e)
			}
		}
		if !more {
			break
		}
	}
	return all, bySession
}

func TestWatcherSameAsBuild(t *testing.T) {
	all, bySession := scenarios()
	w := newWatcher()
	live := map[string][]*event.Event{}
	for _, e := range all {
		for _, a := range w.Add(e) {
			live[a.SessionID] = append(live[a.SessionID], a)
		}
	}
	n := 0
	for id, evs := range bySession {
		want := build(evs).Alerts
		n += len(want)
		if !reflect.DeepEqual(live[id], want) && len(want)+len(live[id]) > 0 {
			t.Errorf("session %s: Watcher alerts = %v, Build alerts = %v", id, alertSum(live[id]), alertSum(want))
		}
	}
	if n != 6 {
		t.Errorf("Build raised %d alerts over the scenarios, want 6 (a mismatch and an unverified install in A and C, a bypass in B and C)", n)
	}
}

func TestWatcherForgets(t *testing.T) {
	r := newRec("S")
	r.fetch("npm", "a", "1.0.0", sriA, "served")
	r.add(event.KindSessionTerminate, event.SourceSession, func(e *event.Event) {
		e.Session = &event.Session{Op: "terminate", Reason: "normal"}
	})
	r.install("npm", "a", "2.0.0", sriA, 11)
	w := newWatcher()
	var got []*event.Event
	for _, e := range r.evs {
		got = append(got, w.Add(e)...)
	}
	// An event journaled after the session's end is judged with what
	// came before, as Build judges it: the fetch of 1.0.0 is known.
	if want := alertSum(build(r.evs).Alerts); fmt.Sprint(alertSum(got)) != fmt.Sprint(want) || len(want) == 0 {
		t.Errorf("Watcher alerts = %v after the session's end, want Build's %v", alertSum(got), want)
	}
	// Past maxEnded ended sessions, the oldest is forgotten, and its
	// late events are ignored, not taken for a session of nothing.
	for i := range maxEnded {
		id := fmt.Sprintf("e%d", i)
		w.Add(&event.Event{SessionID: id, Kind: event.KindFork, Proc: &event.Proc{Pid: 2, PPid: 1}})
		w.Add(&event.Event{SessionID: id, Kind: event.KindSessionTerminate})
	}
	if w.sessions["S"] != nil || len(w.sessions) != maxEnded {
		t.Errorf("Watcher tracks %d sessions (S: %v), want the last %d ended, not S", len(w.sessions), w.sessions["S"] != nil, maxEnded)
	}
	if a := w.Add(r.evs[2]); len(a) != 0 || w.sessions["S"] != nil {
		t.Errorf("a forgotten session's late claim raised %v and tracked it again", alertSum(a))
	}
	// Alerts and rules events are never tracked.
	w.Add(&event.Event{Kind: event.KindAlert, SessionID: "T", Source: event.SourceRules, Alert: &event.Alert{}})
	if w.sessions["T"] != nil {
		t.Errorf("Watcher tracks an alert's session")
	}
}

func TestWatcherBounds(t *testing.T) {
	w := newWatcher()
	for i := range maxSessions + 5 {
		r := newRec(fmt.Sprintf("s%d", i))
		r.fork(10, 1)
		w.Add(r.evs[0])
	}
	if len(w.sessions) != maxSessions {
		t.Errorf("Watcher tracks %d sessions, want %d", len(w.sessions), maxSessions)
	}
	if w.sessions["s0"] != nil || w.sessions[fmt.Sprintf("s%d", maxSessions+4)] == nil {
		t.Error("Watcher kept the oldest session, or lost the newest")
	}
	r := newRec("big")
	for i := range maxProcs + 3 {
		r.fork(int32(i+2), 1)
	}
	for _, e := range r.evs {
		w.Add(e)
	}
	if got := len(w.sessions["big"].procs); got != maxProcs || w.Dropped() != 3 {
		t.Errorf("Watcher tracks %d processes, dropped %d, want %d and 3", got, w.Dropped(), maxProcs)
	}
}

// journal is an Appender that assigns seqs, as the journal does.
type journal struct {
	evs []*event.Event
}

func (j *journal) Append(_ context.Context, evs ...*event.Event) error {
	for _, e := range evs {
		e.Seq = uint64(len(j.evs))
		j.evs = append(j.evs, e)
	}
	return nil
}

func TestTap(t *testing.T) {
	r := newRec("S")
	r.fetch("npm", "a", "1.0.0", sriA, "served")
	r.install("npm", "a", "1.0.0", sriB, 11)
	r.spawn(10, 1, "/usr/bin/npm", "/w", "npm", "i")
	j := &journal{}
	var emitted []*event.Event
	app := newWatcher().Tap(j, func(e *event.Event) { emitted = append(emitted, e) })
	// Seqs are the journal's, not the producers': begin at 100.
	j.evs = make([]*event.Event, 100)
	for _, e := range r.evs {
		e.Seq = 0
		if err := app.Append(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := alertSum(emitted), []string{"shim_mirror_mismatch[101 100]", "unverified_install[101]", "shim_bypass[103]"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Tap emitted %v, want %v", got, want)
	}
	// The alerts, journaled through the tap, raise nothing more.
	n := len(emitted)
	if err := app.Append(t.Context(), emitted...); err != nil {
		t.Fatal(err)
	}
	if len(emitted) != n {
		t.Errorf("Tap emitted %d alerts for alerts", len(emitted)-n)
	}
}

// heldJournal is an Appender that assigns seqs when an append begins, as
// the journal's writer does, and finishes each append when the test
// releases it.
type heldJournal struct {
	mu       sync.Mutex
	n        uint64
	assigned chan struct{}
	release  map[uint64]chan struct{} // by the append's first seq
}

func (j *heldJournal) Append(_ context.Context, evs ...*event.Event) error {
	j.mu.Lock()
	first := j.n
	for _, e := range evs {
		e.Seq = j.n
		j.n++
	}
	rel := j.release[first]
	j.mu.Unlock()
	j.assigned <- struct{}{}
	<-rel
	return nil
}

// TestTapFeedsInSeqOrder: the mirror's verified pkg.fetch (seq 0) and the
// shim's pkg.install of it (seq 1), appended at once by two writers, the
// install's append finishing first: the Watcher is fed the fetch first,
// and no unverified_install is raised. On the code before, the install
// was fed first, and read as an install with no verified fetch.
func TestTapFeedsInSeqOrder(t *testing.T) {
	r := newRec("S")
	fetch := r.fetch("npm", "a", "1.0.0", sriA, "served")
	install := r.install("npm", "a", "1.0.0", sriA, 11)
	j := &heldJournal{assigned: make(chan struct{}), release: map[uint64]chan struct{}{0: make(chan struct{}), 1: make(chan struct{})}}
	var mu sync.Mutex
	var emitted []*event.Event
	app := newWatcher().Tap(j, func(e *event.Event) { mu.Lock(); emitted = append(emitted, e); mu.Unlock() })
	done := map[string]chan error{"fetch": make(chan error, 1), "install": make(chan error, 1)}
	go func() { done["fetch"] <- app.Append(t.Context(), fetch) }()
	<-j.assigned
	go func() { done["install"] <- app.Append(t.Context(), install) }()
	<-j.assigned
	close(j.release[1])
	if err := <-done["install"]; err != nil {
		t.Fatal(err)
	}
	close(j.release[0])
	if err := <-done["fetch"]; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := alertSum(emitted); len(got) != 0 {
		t.Errorf("Tap emitted %v for a verified install whose append finished first, want nothing", got)
	}
}
