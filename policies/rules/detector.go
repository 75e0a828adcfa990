package rules

import (
	"fmt"
	"slices"
	"time"

	"github.com/sandtrail/sandtrail/policies/sigma"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/render"
)

// The bounds of a Detector's memory of what it raised, per session: the
// alerts of one rule (past it, more are counted and the count is recorded
// as a loss event at the session's cleanup), and the sessions it keeps
// (past it, the oldest is forgotten).
const (
	MaxAlertsPerRule = 100
	maxSessions      = 1024
)

// LossSource is the loss event's source for the alerts a Detector did not
// raise past MaxAlertsPerRule: "rules:" and the rule's id.
const LossSource = "rules:"

// Detector runs a Set over the journaled events of every session, in seq
// order, and returns the alert events its rules raise. Each alert names
// the rule, its level (the policy's, or the rule's), the rule's tags, a
// one-line summary of the event that completed the match, and the seqs of
// the events that matched. One rule raises one alert per distinct summary
// in a session (a first-seen domain, a command), at most MaxAlertsPerRule.
// It keeps no events; what it keeps per session is bounded. A Detector is
// not safe for concurrent use: a tap (record/tap) feeds it one event at a
// time.
type Detector struct {
	set      *Set
	ev       *sigma.Evaluator
	host     string
	sessions map[string]*raised
	order    []string
}

// raised is what a Detector raised in one session. ended is set at its
// cleanup, after which an alert past the bound is a loss event at once.
type raised struct {
	seen       map[string]bool
	count      map[*sigma.Rule]int
	suppressed map[*sigma.Rule]uint64
	ended      bool
}

// Option configures a Detector.
type Option func(*Detector)

// WithHost names the host in the alerts the Detector writes, for events
// that name none.
func WithHost(h string) Option { return func(d *Detector) { d.host = h } }

// NewDetector returns a Detector of the set; opts of sigma (Users, the
// bounds) configure its Evaluator.
func NewDetector(s *Set, opts []Option, evOpts ...sigma.Option) *Detector {
	d := &Detector{set: s, ev: sigma.NewEvaluator(s.sigma, evOpts...), sessions: map[string]*raised{}}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Add takes the next journaled event and returns the alert events it
// raises, and at a session's cleanup the loss events of the alerts not
// raised (after it, each such alert is a loss event at once). Alerts, rules events and events outside a session are not
// evaluated.
func (d *Detector) Add(e *event.Event) []*event.Event {
	if e == nil || e.SessionID == "" || e.Kind == event.KindAlert || e.Source == event.SourceRules {
		return nil
	}
	var out []*event.Event
	for _, m := range d.ev.Observe(e) {
		if a := d.raise(e, m); a != nil {
			out = append(out, a)
		}
	}
	if e.Kind == event.KindSessionCleanup {
		out = append(out, d.ended(e)...)
	}
	return out
}

// raise returns the alert of match m, completed by e, or nil when the
// rule is disabled or already raised it in the session.
func (d *Detector) raise(e *event.Event, m sigma.Match) *event.Event {
	r := m.Rule
	if d.set.Disabled(r) {
		return nil
	}
	summary := Summary(e, m)
	st := d.session(e.SessionID)
	key := r.ID + "\x00" + summary
	if st.seen[key] {
		return nil
	}
	if st.count[r] >= MaxAlertsPerRule {
		if st.ended {
			return d.loss(e, r, 1)
		}
		st.suppressed[r]++
		return nil
	}
	st.seen[key] = true
	st.count[r]++
	return &event.Event{V: event.SchemaVersion, TS: time.Now().UTC(), SessionID: e.SessionID, Host: d.hostOf(e),
		Kind: event.KindAlert, Source: event.SourceRules, Proc: procOf(e.Proc),
		Alert: &event.Alert{RuleID: r.ID, Title: r.Title, Level: d.set.Level(r), Refs: slices.Clone(m.Seqs),
			Summary: summary, Tags: slices.Clone(r.Tags)}}
}

func (d *Detector) hostOf(e *event.Event) string {
	if e.Host != "" {
		return e.Host
	}
	return d.host
}

// procOf is the alert's account of the process that raised it: who, not
// what it ran (the refs are that).
func procOf(p *event.Proc) *event.Proc {
	if p == nil || p.Pid == 0 {
		return nil
	}
	return &event.Proc{Pid: p.Pid, PPid: p.PPid, UID: p.UID, Comm: p.Comm}
}

func (d *Detector) session(id string) *raised {
	if st := d.sessions[id]; st != nil {
		return st
	}
	for len(d.sessions) >= maxSessions && len(d.order) > 0 {
		delete(d.sessions, d.order[0])
		d.order = d.order[1:]
	}
	st := &raised{seen: map[string]bool{}, count: map[*sigma.Rule]int{}, suppressed: map[*sigma.Rule]uint64{}}
	d.sessions[id] = st
	d.order = append(d.order, id)
	return st
}

// ended marks a session ended at its cleanup and returns a loss event for
// each rule that had more alerts than it raised. The session's memory stays
// (bounded with the others) for the kernel's events of its last moments,
// which can be journaled after its cleanup.
func (d *Detector) ended(e *event.Event) []*event.Event {
	st := d.session(e.SessionID)
	st.ended = true
	var out []*event.Event
	for _, r := range d.set.Rules() {
		if n := st.suppressed[r]; n > 0 {
			out = append(out, d.loss(e, r, n))
			delete(st.suppressed, r)
		}
	}
	return out
}

// loss is the loss event of n alerts of r not raised in e's session.
func (d *Detector) loss(e *event.Event, r *sigma.Rule, n uint64) *event.Event {
	return &event.Event{V: event.SchemaVersion, TS: time.Now().UTC(), SessionID: e.SessionID,
		Host: d.hostOf(e), Kind: event.KindLoss, Source: event.SourceRules,
		Loss: &event.Loss{Count: n, Source: LossSource + r.ID, LostKind: event.KindAlert}}
}

// Set returns the rules the Detector runs.
func (d *Detector) Set() *Set { return d.set }

// Stats returns the counters of the Detector's Evaluator's bounds.
func (d *Detector) Stats() sigma.Stats { return d.ev.Stats() }

// Summary is the one-line account of a match that an alert carries: the
// event that completed it, as a table shows it, and for a correlation how
// many events it counted.
func Summary(e *event.Event, m sigma.Match) string {
	s := render.Summary(e)
	if m.Rule != nil && m.Rule.Correlation != nil && len(m.Seqs) > 1 {
		s = fmt.Sprintf("%d events, the last: %s", len(m.Seqs), s)
	}
	return s
}
