package sigma

import (
	"container/list"
	"hash/maphash"

	"github.com/sandtrail/sandtrail/record/event"
)

// Match is a rule that an event raised: for a detection rule, the one
// event; for a correlation rule, the events in its window.
type Match struct {
	RuleID string
	Title  string
	Level  string
	Tags   []string
	// Author is the rule's author, which the Detection Rule License asks
	// a message based on a match to keep.
	Author string
	// Seqs are the journal sequence numbers (event.Event.Seq) of the
	// events that raised the match, oldest first.
	Seqs []uint64
	Rule *Rule
}

func newMatch(r *Rule, seqs []uint64) Match {
	return Match{RuleID: r.ID, Title: r.Title, Level: r.Level, Tags: r.Tags, Author: r.Author, Seqs: seqs, Rule: r}
}

// Stats counts what the Evaluator's bounds cost.
type Stats struct {
	// Procs is the number of processes in the table, ProcBytes what
	// their strings are charged.
	Procs     int
	ProcBytes int
	// ProcEvictions are processes dropped from the full table: a later
	// event of their children has no Parent* fields.
	ProcEvictions uint64
	// GroupEvictions are correlation groups dropped when a correlation
	// held DefaultMaxGroups (or MaxGroups) of them.
	GroupEvictions uint64
	// WindowDrops are events dropped from a full correlation window.
	WindowDrops uint64
}

// Option configures an Evaluator.
type Option func(*Evaluator)

// MaxProcs bounds the processes in the process table (DefaultMaxProcs).
func MaxProcs(n int) Option { return func(ev *Evaluator) { ev.procs.max = max(n, 1) } }

// MaxProcBytes bounds the bytes of the strings the process table keeps
// (DefaultMaxProcBytes).
func MaxProcBytes(n int) Option { return func(ev *Evaluator) { ev.procs.maxBytes = max(n, 1) } }

// MaxGroups bounds the groups each correlation keeps (DefaultMaxGroups).
func MaxGroups(n int) Option {
	return func(ev *Evaluator) { ev.maxGroups = max(n, 1) }
}

// MaxWindow bounds the events each correlation group keeps
// (DefaultMaxWindow); a correlation whose condition needs more events
// keeps as many as it needs.
func MaxWindow(n int) Option {
	return func(ev *Evaluator) { ev.maxWindow = max(n, 1) }
}

// Users names uids for SigmaHQ's User field; a uid it does not name is
// written in decimal. Root is always "root".
func Users(names map[uint32]string) Option {
	return func(ev *Evaluator) {
		for uid, n := range names {
			ev.users[uid] = n
		}
	}
}

// Evaluator runs a Set over a stream of events, in journal order. It keeps
// a bounded table of live processes (from process.exec, process.fork and
// process.exit) so that SigmaHQ's Parent* fields resolve, and the windows
// of correlation rules; both are kept per session. An Evaluator is not
// safe for concurrent use.
type Evaluator struct {
	set       *Set
	procs     *procTable
	users     map[uint32]string
	maxGroups int
	maxWindow int
	corr      map[*correlation]*corrState
	agents    agentTable
	seed      maphash.Seed
	v         view
	out       []Match
	stats     Stats
}

// NewEvaluator returns an Evaluator of the set.
func NewEvaluator(s *Set, opts ...Option) *Evaluator {
	ev := &Evaluator{
		set:       s,
		procs:     newProcTable(DefaultMaxProcs, DefaultMaxProcBytes),
		users:     map[uint32]string{0: "root"},
		maxGroups: DefaultMaxGroups,
		maxWindow: DefaultMaxWindow,
		corr:      map[*correlation]*corrState{},
		seed:      maphash.MakeSeed(),
	}
	for _, o := range opts {
		o(ev)
	}
	for _, c := range s.corrs {
		ev.corr[c] = &corrState{c: c, groups: map[uint64]*list.Element{}, window: windowFor(c, ev.maxWindow)}
	}
	ev.v.ev = ev
	return ev
}

// Observe takes the next event of the stream and returns the matches it
// raised. The slice is reused by the next call; the Evaluator keeps no
// reference to e after Observe returns, but the process table keeps its
// strings. An event meets only the rules of its category.
func (ev *Evaluator) Observe(e *event.Event) []Match {
	ev.out = ev.out[:0]
	ev.agents.update(e)
	if rs := ev.set.rulesFor(e.Kind); len(rs) > 0 {
		ev.v.reset(e)
		for _, r := range rs {
			if !r.cond.eval(r.sels, &ev.v) {
				continue
			}
			if r.standalone {
				ev.out = append(ev.out, newMatch(r, []uint64{e.Seq}))
			}
			for _, c := range r.corrs {
				ev.correlate(ev.corr[c], r, e)
			}
		}
		ev.v.e = nil
	}
	switch e.Kind {
	case event.KindExec, event.KindFork, event.KindExit:
		ev.procs.update(e)
	}
	return ev.out
}

// agentUID is the uid the session's main process runs as, from its
// session.start.
func (ev *Evaluator) agentUID(session string) (uint32, bool) {
	uid, ok := ev.agents.m[session]
	return uid, ok
}

// maxAgents bounds the sessions whose agent uid the Evaluator keeps.
const maxAgents = 1 << 14

// agentTable holds the agent uid of the sessions seen, from their
// session.start; when full, the oldest session is forgotten. A session's
// entry outlives its session.cleanup: the kernel's events of its last
// moments can be journaled after it.
type agentTable struct {
	m     map[string]uint32
	order []string
}

func (t *agentTable) update(e *event.Event) {
	if e.Kind != event.KindSessionStart || e.Proc == nil || e.Proc.UID == nil || e.SessionID == "" {
		return
	}
	if t.m == nil {
		t.m = map[string]uint32{}
	}
	if _, ok := t.m[e.SessionID]; !ok {
		t.order = append(t.order, e.SessionID)
	}
	t.m[e.SessionID] = *e.Proc.UID
	for len(t.m) > maxAgents {
		delete(t.m, t.order[0])
		t.order = t.order[1:]
	}
}

// Stats returns the counters of the Evaluator's bounds.
func (ev *Evaluator) Stats() Stats {
	s := ev.stats
	s.Procs, s.ProcBytes = len(ev.procs.m), ev.procs.bytes
	s.ProcEvictions = ev.procs.evictions
	return s
}
