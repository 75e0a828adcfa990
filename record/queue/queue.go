// Package queue is the bounded, non-blocking queue between sandtrail's event
// producers (the kernel collector, the session manager) and the journal.
//
// Producers call Emit, which never blocks: when the queue is full the event is
// dropped and counted, per producer source, session and kind. A single writer
// goroutine drains the queue in batches into the journal (one Append, and so
// one fsync, per batch: group commit). Whenever drops happened it appends a
// "collector.loss" event per (source, session, kind) with the exact number
// dropped, so that no loss is silent. Flush waits until everything emitted
// before it is durable; Close drains everything and stops the writer.
//
// Trust model: the queue holds only events built by root-owned producers in
// this process. It does not attribute or rewrite them; the journal validates
// every event, and an invalid one is counted and logged, never journaled.
package queue

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/record/event"
)

// LossSource is written in event.Loss.Source of the loss events the queue
// appends for the events it dropped.
const LossSource = "record:queue"

// Defaults.
const (
	DefaultSize      = 1 << 16
	DefaultBatchSize = 4096
)

// ErrClosed is returned by Flush after Close, and by a second Close.
var ErrClosed = errors.New("queue: closed")

// Appender takes batches of events; *journal.Journal is one. Append returns
// once the events are durable, or fails for the whole batch.
type Appender interface {
	Append(ctx context.Context, evs ...*event.Event) error
}

// Stats are the queue's counters since New.
type Stats struct {
	// Emitted counts every call of Emit.
	Emitted uint64
	// Dropped counts the events Emit dropped because the queue was full
	// (or closed); Drops breaks it down by producer source.
	Dropped uint64
	Drops   map[event.Source]uint64
	// Appended counts the producers' events appended to the journal, and
	// LossEvents the collector.loss events the queue appended itself.
	Appended   uint64
	LossEvents uint64
	// Invalid counts events the journal refused as invalid; Failed counts
	// events lost because Append failed for another reason.
	Invalid uint64
	Failed  uint64
	// Batches counts the Append calls that succeeded.
	Batches uint64
}

type dropKey struct {
	source  event.Source
	session string
	kind    string
}

// Queue is a bounded event queue with one writer. Emit is safe for
// concurrent use by any number of producers.
type Queue struct {
	app   Appender
	log   hclog.Logger
	host  string
	batch int
	ch    chan *event.Event

	// mu guards closed; Emit holds it shared so that Close cannot slip
	// between its check and its send. dmu guards the drop counts.
	mu     sync.RWMutex
	closed bool
	dmu    sync.Mutex
	// drops are the counts not yet turned into loss events; dropsBy
	// the totals per source, for Stats.
	drops   map[dropKey]uint64
	dropsBy map[event.Source]uint64

	flushes chan chan struct{}
	quit    chan struct{}
	stopped chan struct{}

	emitted, dropped, appended, lossEvents, invalid, failed, batches atomic.Uint64
	lastErr                                                          atomic.Pointer[error]
}

// Option configures a Queue.
type Option func(*Queue)

// WithSize sets how many events the queue holds before Emit drops. The
// default is DefaultSize.
func WithSize(n int) Option { return func(q *Queue) { q.ch = make(chan *event.Event, max(n, 1)) } }

// WithBatchSize caps the events per Append. The default is DefaultBatchSize.
func WithBatchSize(n int) Option { return func(q *Queue) { q.batch = max(n, 1) } }

// WithLogger sets the logger; the default discards.
func WithLogger(l hclog.Logger) Option { return func(q *Queue) { q.log = l.Named("queue") } }

// WithHost sets event.Event.Host on the loss events.
func WithHost(h string) Option { return func(q *Queue) { q.host = h } }

// New starts a queue that appends to app. The caller must Close it.
func New(app Appender, opts ...Option) *Queue {
	q := &Queue{
		app:     app,
		log:     hclog.NewNullLogger(),
		batch:   DefaultBatchSize,
		drops:   map[dropKey]uint64{},
		dropsBy: map[event.Source]uint64{},
		flushes: make(chan chan struct{}),
		quit:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	for _, o := range opts {
		o(q)
	}
	if q.ch == nil {
		q.ch = make(chan *event.Event, DefaultSize)
	}
	go q.run()
	return q
}

// Emit queues e for the journal. It never blocks: when the queue is full,
// or closed, e is dropped and counted, and the writer appends a
// collector.loss event for it. A nil e is ignored.
func (q *Queue) Emit(e *event.Event) {
	if e == nil {
		return
	}
	q.emitted.Add(1)
	q.mu.RLock()
	if !q.closed {
		select {
		case q.ch <- e:
			q.mu.RUnlock()
			return
		default:
		}
	}
	q.mu.RUnlock()
	q.dropped.Add(1)
	q.dmu.Lock()
	if e.Kind == event.KindLoss && e.Loss != nil {
		// A loss event dropped keeps its count: the events it stood for
		// are counted as the queue's own drops, under their kind.
		q.drops[dropKey{e.Source, e.SessionID, e.Loss.LostKind}] += e.Loss.Count
	} else {
		q.drops[dropKey{e.Source, e.SessionID, e.Kind}]++
	}
	q.dropsBy[e.Source]++
	q.dmu.Unlock()
}

// Flush returns once every event emitted before the call is appended (or
// counted as failed), together with the loss events for the drops so far.
// It returns ErrClosed after Close, and ctx's error when ctx is done first.
func (q *Queue) Flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case q.flushes <- done:
	case <-q.stopped:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("flushing queue: %w", ctx.Err())
	}
	select {
	case <-done:
		return q.err()
	case <-ctx.Done():
		return fmt.Errorf("flushing queue: %w", ctx.Err())
	}
}

// Close stops taking events (Emit drops and counts from now on), appends
// everything queued and the final loss events, and stops the writer. It
// returns an error when events were lost because Append failed.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.closed = true
	q.mu.Unlock()
	close(q.quit)
	<-q.stopped
	return q.err()
}

func (q *Queue) err() error {
	if p := q.lastErr.Load(); p != nil {
		return fmt.Errorf("queue: %d events lost appending: %w", q.failed.Load(), *p)
	}
	return nil
}

// Stats returns the counters.
func (q *Queue) Stats() Stats {
	st := Stats{
		Emitted: q.emitted.Load(), Dropped: q.dropped.Load(), Appended: q.appended.Load(),
		LossEvents: q.lossEvents.Load(), Invalid: q.invalid.Load(), Failed: q.failed.Load(),
		Batches: q.batches.Load(), Drops: map[event.Source]uint64{},
	}
	q.dmu.Lock()
	for k, v := range q.dropsBy {
		st.Drops[k] = v
	}
	q.dmu.Unlock()
	return st
}

// run is the writer.
func (q *Queue) run() {
	defer close(q.stopped)
	buf := make([]*event.Event, 0, q.batch)
	for {
		select {
		case e := <-q.ch:
			buf = q.gather(append(buf[:0], e))
			q.write(buf)
		case done := <-q.flushes:
			q.drain(buf)
			close(done)
		case <-q.quit:
			q.drain(buf)
			return
		}
	}
}

// gather adds what is waiting, up to a batch.
func (q *Queue) gather(buf []*event.Event) []*event.Event {
	for len(buf) < q.batch {
		select {
		case e := <-q.ch:
			buf = append(buf, e)
		default:
			return buf
		}
	}
	return buf
}

// drain appends everything queued, then the loss events.
func (q *Queue) drain(buf []*event.Event) {
	for {
		buf = q.gather(buf[:0])
		if len(buf) == 0 {
			break
		}
		q.write(buf)
	}
	q.write(buf[:0])
}

// write appends buf, followed by the loss events for the drops counted so
// far, when there were any.
func (q *Queue) write(buf []*event.Event) {
	n := len(buf)
	buf = append(buf, q.lossEventsNow()...)
	if len(buf) == 0 {
		return
	}
	q.appendBatch(buf, n)
}

// lossEventsNow takes the drop counts and turns them into loss events, in a
// stable order.
func (q *Queue) lossEventsNow() []*event.Event {
	q.dmu.Lock()
	if len(q.drops) == 0 {
		q.dmu.Unlock()
		return nil
	}
	drops := q.drops
	q.drops = map[dropKey]uint64{}
	q.dmu.Unlock()
	keys := make([]dropKey, 0, len(drops))
	for k := range drops {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.source != b.source {
			return a.source < b.source
		}
		if a.session != b.session {
			return a.session < b.session
		}
		return a.kind < b.kind
	})
	now := time.Now().UTC()
	out := make([]*event.Event, 0, len(keys))
	for _, k := range keys {
		out = append(out, toLossEvent(k, drops[k], q.host, now))
	}
	return out
}

// toLossEvent builds the loss event for count events dropped under key k.
// It carries the producer's source and session, so that it is counted
// where the lost events would have been; when those would not make a
// valid event it falls back to source journal with no session.
func toLossEvent(k dropKey, count uint64, host string, now time.Time) *event.Event {
	e := &event.Event{
		V: event.SchemaVersion, TS: now, SessionID: k.session, Host: host, Kind: event.KindLoss,
		Source: k.source, Loss: &event.Loss{Count: count, Source: LossSource, LostKind: k.kind},
	}
	if len(k.kind) > 64 {
		e.Loss.LostKind = ""
	}
	if e.Validate() != nil {
		e.Source, e.SessionID = event.SourceJournal, ""
	}
	e.Loss.HostWide = e.SessionID == ""
	return e
}

// appendBatch appends buf, whose first n events are the producers'. When
// the journal refuses the batch as invalid it appends the events one by
// one, so that one bad event costs only itself.
func (q *Queue) appendBatch(buf []*event.Event, n int) {
	err := q.app.Append(context.Background(), buf...)
	if err == nil {
		q.appended.Add(uint64(n))
		q.lossEvents.Add(uint64(len(buf) - n))
		q.batches.Add(1)
		return
	}
	if !errors.Is(err, event.ErrInvalid) {
		q.fail(buf, n, err)
		return
	}
	for i, e := range buf {
		err := q.app.Append(context.Background(), e)
		switch {
		case err == nil && i < n:
			q.appended.Add(1)
			q.batches.Add(1)
		case err == nil:
			q.lossEvents.Add(1)
			q.batches.Add(1)
		case errors.Is(err, event.ErrInvalid):
			q.invalid.Add(1)
			q.log.Warn("event refused by the journal", "kind", e.Kind, "source", e.Source, "session_id", e.SessionID, "error", err)
		default:
			q.fail([]*event.Event{e}, min(1, max(n-i, 0)), err)
		}
	}
}

func (q *Queue) fail(buf []*event.Event, n int, err error) {
	q.failed.Add(uint64(len(buf)))
	q.lastErr.Store(&err)
	q.log.Error("appending events failed", "events", len(buf), "producer_events", n, "error", err)
}
