package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
	"github.com/sandtrail/sandtrail/record/queue"
)

// gated delays every Append until its gate is opened: a consumer as slow as
// the test wants.
type gated struct {
	next  queue.Appender
	gate  chan struct{}
	calls chan struct{}
}

func newGated(next queue.Appender) *gated {
	return &gated{next: next, gate: make(chan struct{}), calls: make(chan struct{}, 1<<20)}
}

func (g *gated) Append(ctx context.Context, evs ...*event.Event) error {
	g.calls <- struct{}{}
	<-g.gate
	return g.next.Append(ctx, evs...)
}

func ev(session, kind string, i int) *event.Event {
	return &event.Event{V: event.SchemaVersion, TS: time.Now(), SessionID: session, Kind: kind,
		Source: event.SourceKernel, Proc: &event.Proc{Pid: int32(i + 1)}}
}

type key struct{ session, kind string }

// scanCounts reads the journal back: the producers' events per key, and
// what the queue's loss events say was lost per key.
func scanCounts(t *testing.T, dir string) (got, lost map[key]uint64) {
	t.Helper()
	got, lost = map[key]uint64{}, map[key]uint64{}
	err := journal.Scan(dir, 0, func(_ uint64, raw []byte) error {
		e, err := event.Unmarshal(raw)
		if err != nil {
			return err
		}
		if e.Kind == event.KindLoss {
			if e.Loss.Source != queue.LossSource {
				return fmt.Errorf("loss source %q, want %q", e.Loss.Source, queue.LossSource)
			}
			lost[key{e.SessionID, e.Loss.LostKind}] += e.Loss.Count
			return nil
		}
		got[key{e.SessionID, e.Kind}]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, lost
}

// TestSlowAppenderDropsExactly: with the appender stuck, Emit keeps
// returning (the producers finish while nothing is appended), and once the
// appender moves the loss events account for every dropped event, per
// session and kind.
func TestSlowAppenderDropsExactly(t *testing.T) {
	tests := []struct {
		name      string
		size      int
		producers int
		each      int
	}{
		{name: "one producer", size: 8, producers: 1, each: 500},
		{name: "four producers", size: 64, producers: 4, each: 2000},
		{name: "queue of one", size: 1, producers: 2, each: 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, dir := journaltest.Open(t)
			g := newGated(j)
			q := queue.New(g, queue.WithSize(tt.size), queue.WithBatchSize(16))
			want := map[key]uint64{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for p := range tt.producers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					local := map[key]uint64{}
					for i := range tt.each {
						kind := []string{event.KindExec, event.KindExit}[i%2]
						s := fmt.Sprintf("s%d", p%2)
						q.Emit(ev(s, kind, i))
						local[key{s, kind}]++
					}
					mu.Lock()
					for k, v := range local {
						want[k] += v
					}
					mu.Unlock()
				}()
			}
			// The producers finish although the appender is stuck in its
			// first call: Emit did not block.
			wg.Wait()
			st := q.Stats()
			total := uint64(tt.producers * tt.each)
			if st.Emitted != total {
				t.Errorf("Stats().Emitted = %d, want %d", st.Emitted, total)
			}
			// At most the queue and the one batch the writer holds are
			// in flight; everything else was dropped.
			if st.Dropped < total-uint64(tt.size)-16 {
				t.Errorf("Stats().Dropped = %d, want at least %d", st.Dropped, total-uint64(tt.size)-16)
			}
			if st.Drops[event.SourceKernel] != st.Dropped {
				t.Errorf("Stats().Drops[kernel] = %d, want %d", st.Drops[event.SourceKernel], st.Dropped)
			}
			close(g.gate)
			if err := q.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}
			got, lost := scanCounts(t, dir)
			var appended, lostTotal uint64
			for k, w := range want {
				if got[k]+lost[k] != w {
					t.Errorf("%v: journaled %d + lost %d = %d, want %d", k, got[k], lost[k], got[k]+lost[k], w)
				}
				appended += got[k]
				lostTotal += lost[k]
			}
			if lostTotal != st.Dropped {
				t.Errorf("loss events count %d, want Stats().Dropped = %d", lostTotal, st.Dropped)
			}
			st = q.Stats()
			if st.Appended != appended || st.Appended+st.Dropped != total {
				t.Errorf("Stats() = %+v, want appended %d of %d", st, appended, total)
			}
		})
	}
}

// TestCloseDrains: Close appends everything queued, even when the appender
// is slow at the time.
func TestCloseDrains(t *testing.T) {
	j, dir := journaltest.Open(t)
	g := newGated(j)
	q := queue.New(g, queue.WithSize(1000), queue.WithBatchSize(7))
	for i := range 900 {
		q.Emit(ev("s", event.KindExec, i))
	}
	closed := make(chan error, 1)
	go func() { closed <- q.Close() }()
	<-g.calls // the writer is inside Append
	close(g.gate)
	if err := <-closed; err != nil {
		t.Fatalf("Close() = %v", err)
	}
	got, lost := scanCounts(t, dir)
	if got[key{"s", event.KindExec}] != 900 || len(lost) != 0 {
		t.Errorf("journal has %v, lost %v, want 900 events and no loss", got, lost)
	}
	if st := q.Stats(); st.Appended != 900 || st.Dropped != 0 {
		t.Errorf("Stats() = %+v, want 900 appended, none dropped", st)
	}
	// After Close, Emit still does not block; it counts.
	q.Emit(ev("s", event.KindExec, 1))
	if st := q.Stats(); st.Dropped != 1 {
		t.Errorf("Stats().Dropped after Close = %d, want 1", st.Dropped)
	}
	if err := q.Close(); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("second Close() = %v, want ErrClosed", err)
	}
	if err := q.Flush(context.Background()); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Flush() after Close = %v, want ErrClosed", err)
	}
}

// TestFlush: after Flush, every event emitted before it is in the journal.
func TestFlush(t *testing.T) {
	j, dir := journaltest.Open(t)
	q := queue.New(j)
	defer q.Close()
	for round := 1; round <= 3; round++ {
		for i := range 100 {
			q.Emit(ev("s", event.KindFork, i))
		}
		if err := q.Flush(context.Background()); err != nil {
			t.Fatalf("Flush() = %v", err)
		}
		if got := j.Size(); got != uint64(round*100) {
			t.Errorf("after Flush %d: journal.Size() = %d, want %d", round, got, round*100)
		}
	}
	got, _ := scanCounts(t, dir)
	if got[key{"s", event.KindFork}] != 300 {
		t.Errorf("journal holds %v, want 300 forks", got)
	}
}

// TestInvalidEventCostsOnlyItself: the journal refuses an invalid event;
// the rest of its batch is still appended.
func TestInvalidEventCostsOnlyItself(t *testing.T) {
	j, dir := journaltest.Open(t)
	g := newGated(j)
	q := queue.New(g, queue.WithBatchSize(100))
	for i := range 10 {
		q.Emit(ev("s", event.KindExec, i))
	}
	q.Emit(&event.Event{Kind: event.KindExec, Source: event.SourceShim}) // no session, no proc
	for i := range 10 {
		q.Emit(ev("s", event.KindExec, i))
	}
	close(g.gate)
	if err := q.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	got, _ := scanCounts(t, dir)
	if got[key{"s", event.KindExec}] != 20 {
		t.Errorf("journal holds %v, want the 20 valid events", got)
	}
	if st := q.Stats(); st.Invalid != 1 || st.Appended != 20 {
		t.Errorf("Stats() = %+v, want 1 invalid and 20 appended", st)
	}
}

type failing struct{ err error }

func (f failing) Append(context.Context, ...*event.Event) error { return f.err }

// TestAppendFailureIsReported: events lost to a failing journal are counted
// and Close says so.
func TestAppendFailureIsReported(t *testing.T) {
	boom := errors.New("disk on fire")
	q := queue.New(failing{boom})
	for i := range 5 {
		q.Emit(ev("s", event.KindExec, i))
	}
	err := q.Close()
	if !errors.Is(err, boom) {
		t.Fatalf("Close() = %v, want it to wrap %v", err, boom)
	}
	if st := q.Stats(); st.Failed != 5 {
		t.Errorf("Stats().Failed = %d, want 5", st.Failed)
	}
}

// TestLossEventForSessionSource: a dropped session event is accounted for
// under its own source and session, so the session's record shows it.
func TestLossEventForSessionSource(t *testing.T) {
	j, dir := journaltest.Open(t)
	g := newGated(j)
	q := queue.New(g, queue.WithSize(1), queue.WithBatchSize(1))
	for range 50 {
		q.Emit(&event.Event{V: 1, TS: time.Now(), SessionID: "abc", Kind: event.KindLimitHit, Source: event.SourceSession,
			Limit: &event.Limit{Type: "pids", Action: "warn"}})
	}
	close(g.gate)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	var sawLoss bool
	err := journal.Scan(dir, 0, func(_ uint64, raw []byte) error {
		e, err := event.Unmarshal(raw)
		if err != nil {
			return err
		}
		if e.Kind == event.KindLoss {
			sawLoss = true
			if e.Source != event.SourceSession || e.SessionID != "abc" || e.Loss.LostKind != event.KindLimitHit {
				t.Errorf("loss event = source %q session %q lost_kind %q, want session, abc, limit.hit", e.Source, e.SessionID, e.Loss.LostKind)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sawLoss {
		t.Error("no loss event journaled")
	}
}

// TestDroppedLossKeepsItsCount: a collector.loss event that the full queue
// drops is not itself "a lost loss event": the events it counted are
// counted again, under their kind and session, in the queue's own loss
// events.
func TestDroppedLossKeepsItsCount(t *testing.T) {
	j, dir := journaltest.Open(t)
	g := newGated(j)
	q := queue.New(g, queue.WithSize(1), queue.WithBatchSize(1))
	const n = 20
	for range n {
		q.Emit(&event.Event{V: 1, TS: time.Now(), SessionID: "abc", Kind: event.KindLoss, Source: event.SourceKernel,
			Loss: &event.Loss{Count: 1000, Source: "kernel:ringbuf", LostKind: event.KindFileCreate}})
	}
	close(g.gate)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	var total uint64
	err := journal.Scan(dir, 0, func(_ uint64, raw []byte) error {
		e, err := event.Unmarshal(raw)
		if err != nil {
			return err
		}
		if e.Kind == event.KindLoss {
			if e.Loss.LostKind != event.KindFileCreate || e.SessionID != "abc" {
				t.Errorf("loss event: session %q, lost kind %q; want abc, file.create", e.SessionID, e.Loss.LostKind)
			}
			total += e.Loss.Count
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total != n*1000 {
		t.Errorf("the journal's losses sum to %d, want the %d the dropped loss events counted", total, n*1000)
	}
}
