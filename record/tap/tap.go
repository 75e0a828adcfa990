// Package tap feeds the events appended to the journal, in seq order, to
// the live rules (the package view's Watcher, the detection rules), and
// passes the alerts they raise back to be journaled in turn.
//
// Trust: a tap sees only what was appended, after the append succeeded,
// so a rule never reads an event the journal does not hold; the events it
// feeds are the record's, to be read as their source says.
package tap

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/sandtrail/sandtrail/record/event"
)

// Appender takes batches of events and assigns their Seq;
// *journal.Journal is one.
type Appender interface {
	Append(ctx context.Context, evs ...*event.Event) error
}

// Rules take journaled events one at a time, in seq order, and return the
// alert events they raise (none, usually). They must ignore the alerts
// they are fed back.
type Rules interface {
	Add(e *event.Event) []*event.Event
}

// maxPending bounds the events a tap holds back for seq order.
const maxPending = 4096

// New returns an Appender that appends to app and then, once the events
// are durable and have their seqs, feeds them to each of rules in turn and
// passes each alert they raise to emit (a queue's Emit, which journals it
// through this Appender in turn). Give it to every writer of the journal
// (the queue and the ingest server) so that the rules see every event.
//
// Two writers appending at once finish in either order (a journal commits
// both in one group), so the tap feeds in seq order: the events of an
// append that finishes while another is under way wait for it, and are fed
// with its events once no append is under way (or once maxPending events
// wait, as they come). Fed out of order, a pkg.install whose verified
// pkg.fetch was appended just before it by the other writer read as an
// unverified install. The rules run under the tap's lock, one event at a
// time, so they need no lock of their own for the tap's sake.
func New(app Appender, emit func(*event.Event), rules ...Rules) Appender {
	return &tap{app: app, rules: rules, emit: emit}
}

type tap struct {
	app   Appender
	rules []Rules
	emit  func(*event.Event)

	mu       sync.Mutex
	inflight int            // appends under way
	pending  []*event.Event // appended and not yet fed
}

var _ Appender = (*tap)(nil)

func (t *tap) Append(ctx context.Context, evs ...*event.Event) error {
	t.mu.Lock()
	t.inflight++
	t.mu.Unlock()
	err := t.app.Append(ctx, evs...)
	t.mu.Lock()
	t.inflight--
	if err == nil {
		t.pending = append(t.pending, evs...)
	}
	var alerts []*event.Event
	if t.inflight == 0 || len(t.pending) >= maxPending {
		slices.SortStableFunc(t.pending, func(a, b *event.Event) int { return cmp.Compare(a.Seq, b.Seq) })
		for _, e := range t.pending {
			for _, r := range t.rules {
				alerts = append(alerts, r.Add(e)...)
			}
		}
		t.pending = nil
	}
	t.mu.Unlock()
	for _, a := range alerts {
		t.emit(a)
	}
	return err
}
