package timeline

import (
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// TestBuilder: children go under the latest process with their parent's
// pid seen before them, a pid seen again after its exit is a new process,
// a process seen only at its exit is kept, and session events are steps.
func TestBuilder(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	start := func(pid int32) time.Time { return t0.Add(time.Duration(pid) * time.Second) }
	proc := func(kind string, pid, ppid int32, st time.Time) *event.Event {
		return &event.Event{Kind: kind, TS: t0, Proc: &event.Proc{Pid: pid, PPid: ppid, StartTS: st, Argv: []string{"p"}}}
	}
	b := New("S")
	evs := []*event.Event{
		{Kind: "session.create", TS: t0, Session: &event.Session{Op: "create", User: "agent"}},
		proc("process.exec", 10, 1, start(10)),
		proc("process.fork", 11, 10, start(11)),
		proc("process.exec", 11, 10, start(11)),
		proc("process.exit", 11, 10, start(11)),
		// pid 11 again, a new process.
		proc("process.fork", 11, 10, start(12)),
		proc("process.exit", 99, 10, time.Time{}),
		proc("process.exit", 10, 1, start(10)),
	}
	for i, e := range evs {
		b.Add(uint64(i), e)
	}
	tl := b.Timeline()
	if tl.Events != len(evs) || tl.SessionID != "S" {
		t.Fatalf("Timeline() = %d events of %q, want %d of S", tl.Events, tl.SessionID, len(evs))
	}
	if len(tl.Processes) != 1 || tl.Processes[0].Pid != 10 {
		t.Fatalf("roots = %+v, want pid 10 alone", tl.Processes)
	}
	root := tl.Processes[0]
	var pids []int32
	for _, c := range root.Children {
		pids = append(pids, c.Pid)
	}
	if len(pids) != 3 || pids[0] != 11 || pids[1] != 11 || pids[2] != 99 {
		t.Errorf("children of 10 = %v, want [11 11 99]", pids)
	}
	if c := root.Children[0]; !c.Exited || c.Execs != 1 || root.Children[1].Exited {
		t.Errorf("first 11 exited %v execs %d, second 11 exited %v; want true 1 false", c.Exited, c.Execs, root.Children[1].Exited)
	}
	if len(tl.Steps) != 1 || tl.Steps[0].Kind != "session.create" || tl.Steps[0].Detail != "user=agent" {
		t.Errorf("steps = %+v, want the session.create with user=agent", tl.Steps)
	}
	if d, ok := root.Children[2].Duration(); ok || d != 0 {
		t.Errorf("Duration() of a process with no start time = %v %v, want 0 false", d, ok)
	}
	if d, ok := root.Children[0].Duration(); !ok || d != t0.Sub(start(11)) {
		t.Errorf("Duration() of pid 11 = %v %v, want %v true", d, ok, t0.Sub(start(11)))
	}
}

// TestBuilderLost: the timeline sums the session's loss events, and each is
// a step.
func TestBuilderLost(t *testing.T) {
	b := New("S")
	for i, n := range []uint64{3, 4} {
		b.Add(uint64(i), &event.Event{Kind: event.KindLoss, TS: time.Now(), Loss: &event.Loss{Count: n, Source: "kernel:ringbuf"}})
	}
	if tl := b.Timeline(); tl.Lost != 7 || len(tl.Steps) != 2 {
		t.Errorf("Timeline() lost %d with %d steps, want 7 with 2", tl.Lost, len(tl.Steps))
	}
}
