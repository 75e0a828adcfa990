package pkgview

import (
	"sync"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/tap"
)

// maxSessions bounds the sessions a Watcher tracks at once; past it, the
// oldest is forgotten.
const maxSessions = 1024

// maxEnded bounds the ended sessions whose state a Watcher keeps for their
// late events, and maxGone the ended sessions it remembers having
// forgotten, whose events it then ignores.
const (
	maxEnded = 64
	maxGone  = 4096
)

// Watcher runs the rules of Build live, over every session's events as
// they are journaled, and returns the alerts to emit. It keeps, per
// session, only what the rules need (the live processes' shim ancestry and
// each package's installs and served fetches), bounded. At a session's
// session.terminate (or session.cleanup) it decides what is still waiting
// and keeps the state a while: the kernel's events of a session's last
// moments can be journaled after its end, and a session started again
// from nothing would take them for installs nobody fetched. Of the ended
// sessions it keeps the last maxEnded; the events of one forgotten after
// its end are ignored.
//
// Alerts name their evidence by seq (event.Alert.Refs), which the journal
// assigns on append: feed a Watcher each event after it was appended (see
// Tap), in journal order. An event fed with Seq 0 that is not the journal's
// first gives wrong refs. Its methods are safe for concurrent use.
type Watcher struct {
	o        options
	mu       sync.Mutex
	sessions map[string]*state
	order    []string // sessions by first event, for eviction; may hold forgotten ones
	// ended are the ended sessions still tracked, oldest first; gone the
	// ones forgotten after their end, goneOrder those by forgetting.
	ended     []string
	gone      map[string]bool
	goneOrder []string
	dropped   uint64
}

// NewWatcher returns a Watcher with no sessions.
func NewWatcher(opts ...Option) *Watcher {
	return &Watcher{o: defaults(opts), sessions: map[string]*state{}, gone: map[string]bool{}}
}

// Add takes the next journaled event and returns the alert events it
// raises (none, usually). Alerts, rules events and events outside a
// session are ignored.
func (w *Watcher) Add(e *event.Event) []*event.Event {
	if e == nil || e.SessionID == "" || e.Kind == event.KindAlert || e.Source == event.SourceRules {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gone[e.SessionID] {
		w.dropped++
		return nil
	}
	s := w.sessions[e.SessionID]
	if e.Kind == event.KindSessionTerminate || e.Kind == event.KindSessionCleanup {
		if s == nil {
			return nil
		}
		out := s.flush(e) // what the kernel saw installed and nobody decided yet
		if !s.ended {
			s.ended = true
			w.ended = append(w.ended, e.SessionID)
			w.trimEnded()
		}
		return out
	}
	if s == nil {
		s = w.start(e.SessionID)
	}
	return s.add(e)
}

// trimEnded forgets the oldest ended sessions past maxEnded, and
// remembers them as gone.
func (w *Watcher) trimEnded() {
	for len(w.ended) > maxEnded {
		old := w.ended[0]
		w.ended = w.ended[1:]
		if s := w.sessions[old]; s != nil {
			w.dropped += s.dropped
			delete(w.sessions, old)
		}
		w.gone[old] = true
		w.goneOrder = append(w.goneOrder, old)
	}
	for len(w.goneOrder) > maxGone {
		delete(w.gone, w.goneOrder[0])
		w.goneOrder = w.goneOrder[1:]
	}
}

// start tracks a new session, forgetting the oldest past maxSessions.
func (w *Watcher) start(id string) *state {
	for len(w.sessions) >= maxSessions && len(w.order) > 0 {
		old := w.order[0]
		w.order = w.order[1:]
		if s := w.sessions[old]; s != nil {
			w.dropped += s.dropped
			delete(w.sessions, old)
		}
	}
	if len(w.order) > 2*maxSessions {
		live := w.order[:0]
		for _, id := range w.order {
			if w.sessions[id] != nil {
				live = append(live, id)
			}
		}
		w.order = live
	}
	s := newState(id, w.o, true)
	w.sessions[id] = s
	w.order = append(w.order, id)
	return s
}

// Dropped counts the events not tracked because a session's bound was
// reached, in sessions forgotten so far and in those tracked.
func (w *Watcher) Dropped() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.dropped
	for _, s := range w.sessions {
		n += s.dropped
	}
	return n
}

// Tap returns an Appender that appends to app and feeds w every event
// once it is journaled, in seq order, passing the alerts it raises to emit
// (see tap.New, which the daemon uses to feed every live rule at once).
func (w *Watcher) Tap(app tap.Appender, emit func(*event.Event)) tap.Appender {
	return tap.New(app, emit, w)
}
