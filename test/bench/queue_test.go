package bench

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
	"github.com/sandtrail/sandtrail/record/queue"
)

// queueDiscard is an appender that only counts.
type queueDiscard struct{ n atomic.Uint64 }

func (d *queueDiscard) Append(_ context.Context, evs ...*event.Event) error {
	d.n.Add(uint64(len(evs)))
	return nil
}

// BenchmarkQueueEmit measures what Emit costs a producer, against the
// least a non-blocking producer can do: a select with a default case on a
// buffered channel. "accept" times events that fit (the queue and the
// channel are emptied between chunks, untimed); "drop" times a full queue
// (its appender stuck) against a full channel. Reports ns per event for
// both and their ratio (x_chan).
func BenchmarkQueueEmit(b *testing.B) {
	evs := journalBenchEvents(1024)
	const chunk = 1 << 14
	b.Run("accept", func(b *testing.B) {
		q := queue.New(&queueDiscard{}, queue.WithSize(chunk))
		defer q.Close()
		ch := make(chan *event.Event, chunk)
		var tq, tc time.Duration
		for done := 0; done < b.N; done += chunk {
			n := min(chunk, b.N-done)
			start := time.Now()
			for i := range n {
				q.Emit(evs[i%len(evs)])
			}
			tq += time.Since(start)
			start = time.Now()
			for i := range n {
				select {
				case ch <- evs[i%len(evs)]:
				default:
					b.Fatal("baseline channel full")
				}
			}
			tc += time.Since(start)
			if err := q.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			for range n {
				<-ch
			}
		}
		if st := q.Stats(); st.Dropped != 0 {
			b.Fatalf("queue dropped %d events", st.Dropped)
		}
		queueReport(b, tq, tc)
	})
	b.Run("drop", func(b *testing.B) {
		st := &queueStuck{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
		q := queue.New(st, queue.WithSize(1), queue.WithBatchSize(1))
		defer q.Close()
		defer close(st.gate)
		ch := make(chan *event.Event, 1)
		ch <- evs[0]
		q.Emit(evs[0])
		<-st.entered   // the writer is stuck in Append
		q.Emit(evs[0]) // the queue is full
		before := q.Stats().Dropped
		start := time.Now()
		for i := range b.N {
			q.Emit(evs[i%len(evs)])
		}
		tq := time.Since(start)
		start = time.Now()
		for i := range b.N {
			select {
			case ch <- evs[i%len(evs)]:
				b.Fatal("baseline channel not full")
			default:
			}
		}
		tc := time.Since(start)
		if got := q.Stats().Dropped - before; got != uint64(b.N) {
			b.Fatalf("queue dropped %d of %d", got, b.N)
		}
		queueReport(b, tq, tc)
	})
}

// queueStuck is an appender that blocks until gate is closed.
type queueStuck struct{ gate, entered chan struct{} }

func (g *queueStuck) Append(context.Context, ...*event.Event) error {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.gate
	return nil
}

func queueReport(b *testing.B, tq, tc time.Duration) {
	b.ReportMetric(float64(tq.Nanoseconds())/float64(b.N), "ns/emit")
	b.ReportMetric(float64(tc.Nanoseconds())/float64(b.N), "ns/chan")
	b.ReportMetric(float64(tq)/float64(max(tc, 1)), "x_chan")
}

// BenchmarkQueueJournal measures events per second into a real journal
// (fsync per batch) from 4 producers: through the queue (Emit, then one
// Flush), against the baseline of each producer appending its own events
// one Append at a time (the journal's own group commit gathers
// concurrent Appends). Reports both rates and their ratio (x_direct).
func BenchmarkQueueJournal(b *testing.B) {
	const producers, each = 4, 2000
	signer, _ := journaltest.Keys(b, "bench")
	evs := journalBenchEvents(producers * each)
	run := func(dir string, viaQueue bool) (time.Duration, queue.Stats) {
		j, err := journal.Open(dir, signer)
		if err != nil {
			b.Fatal(err)
		}
		defer j.Close()
		var q *queue.Queue
		if viaQueue {
			q = queue.New(j)
		}
		start := time.Now()
		var wg sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					e := *evs[p*each+i]
					if viaQueue {
						q.Emit(&e)
					} else if err := j.Append(context.Background(), &e); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		var st queue.Stats
		if viaQueue {
			if err := q.Close(); err != nil {
				b.Fatal(err)
			}
			st = q.Stats()
		}
		return time.Since(start), st
	}
	var tq, td time.Duration
	var drops uint64
	for i := range b.N {
		root := b.TempDir()
		d, st := run(filepath.Join(root, "q", string(rune('a'+i%26))), true)
		tq += d
		drops += st.Dropped
		d, _ = run(filepath.Join(root, "d", string(rune('a'+i%26))), false)
		td += d
	}
	n := float64(b.N * producers * each)
	b.ReportMetric(n/tq.Seconds(), "events/s_queue")
	b.ReportMetric(n/td.Seconds(), "events/s_direct")
	b.ReportMetric(td.Seconds()/tq.Seconds(), "x_direct")
	b.ReportMetric(float64(drops), "drops")
}
