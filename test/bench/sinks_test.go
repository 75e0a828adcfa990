package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
	"github.com/sandtrail/sandtrail/record/ocsf"
	"github.com/sandtrail/sandtrail/record/sink"
	"github.com/sandtrail/sandtrail/record/sink/sinktest"
)

// sinkSpec is one sink of a benchmark.
type sinkSpec struct {
	name, format string
	s            sink.Sink
}

// sinkSet starts the three sinks of the benchmarks (a jsonl file, an ocsf
// file, NATS JetStream) and the extra ones on j, and returns their runners
// and a stop.
func sinkSet(b *testing.B, j *journal.Journal, dir string, extra ...sinkSpec) ([]*sink.Runner, func()) {
	b.Helper()
	ns, err := sink.NewNATS(context.Background(), sink.NATSConfig{URL: sinktest.StartNATS(b, 0, b.TempDir()).ClientURL(), Host: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	jf, err := sink.NewFile(filepath.Join(b.TempDir(), "all.jsonl"), 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	of, err := sink.NewFile(filepath.Join(b.TempDir(), "ocsf.jsonl"), 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	cur := b.TempDir()
	specs := append([]sinkSpec{{"file", sink.FormatJSONL, jf}, {"ocsf", sink.FormatOCSF, of}, {"nats", sink.FormatJSONL, ns}}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	var runners []*sink.Runner
	done := make(chan struct{}, len(specs))
	for _, sp := range specs {
		r, err := sink.NewRunner(sink.Config{Name: sp.name, Format: sp.format, JournalDir: dir, CursorDir: cur, Product: ocsf.Sandtrail()}, sp.s, j)
		if err != nil {
			b.Fatal(err)
		}
		runners = append(runners, r)
		go func() { r.Run(ctx); done <- struct{}{} }()
	}
	return runners, func() {
		cancel()
		for range specs {
			<-done
		}
		for _, sp := range specs {
			sp.s.Close()
		}
	}
}

func sinkBenchJournal(b *testing.B) (*journal.Journal, string) {
	b.Helper()
	s, _ := journaltest.Keys(b, "bench")
	dir := filepath.Join(b.TempDir(), "journal")
	j, err := journal.Open(dir, s)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { j.Close() })
	return j, dir
}

func sinkBatch(n int, now time.Time) []*event.Event {
	uid := uint32(1000)
	evs := make([]*event.Event, n)
	for i := range evs {
		evs[i] = &event.Event{V: event.SchemaVersion, TS: now, SessionID: "s1", Kind: event.KindExec, Source: event.SourceKernel,
			Proc: &event.Proc{Pid: int32(1000 + i), UID: &uid, Comm: "node", Argv: []string{"node", "install.js"}, Cwd: "/w"}}
	}
	return evs
}

// BenchmarkSinkLatency appends 10,000 events a second (100 every 10 ms)
// for two seconds with four sinks following the journal (a jsonl file, an
// ocsf file, NATS JetStream on loopback, OTLP/HTTP into a real
// OpenTelemetry Collector on loopback) and reports each sink's
// event-to-sink latency, p50 and p99, from the events' ts to their batch's
// write.
func BenchmarkSinkLatency(b *testing.B) {
	endpoint := sinktest.StartCollector(b).Endpoint()
	for range b.N {
		j, dir := sinkBenchJournal(b)
		o, err := sink.NewOTLP(sink.OTLPConfig{Endpoint: endpoint, Host: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		runners, stop := sinkSet(b, j, dir, sinkSpec{"otlp", sink.FormatJSONL, o})
		tick := time.NewTicker(10 * time.Millisecond)
		for range 200 {
			<-tick.C
			if err := j.Append(context.Background(), sinkBatch(100, time.Now())...); err != nil {
				b.Fatal(err)
			}
		}
		tick.Stop()
		deadline := time.Now().Add(30 * time.Second)
		for _, r := range runners {
			for r.Status().Cursor < j.Size() && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		for _, r := range runners {
			st := r.Status()
			if st.Cursor != j.Size() {
				b.Fatalf("sink %s at %d of %d", st.Name, st.Cursor, j.Size())
			}
			b.ReportMetric(float64(st.LatencyP50.Microseconds()), st.Name+"_p50_us")
			b.ReportMetric(float64(st.LatencyP99.Microseconds()), st.Name+"_p99_us")
		}
		stop()
	}
}

// BenchmarkIngestWithSinks appends 200,000 events in batches of 256 as
// fast as the journal takes them, with no sink and then with the three
// sinks of BenchmarkSinkLatency following it, and reports the events/s of
// each and their ratio.
func BenchmarkIngestWithSinks(b *testing.B) {
	const n, batch = 200_000, 256
	rate := func(withSinks bool) float64 {
		j, dir := sinkBenchJournal(b)
		stop := func() {}
		if withSinks {
			_, stop = sinkSet(b, j, dir)
		}
		defer stop()
		evs := sinkBatch(batch, time.Now())
		t0 := time.Now()
		for range n / batch {
			cp := make([]*event.Event, batch)
			for i, e := range evs {
				c := *e
				cp[i] = &c
			}
			if err := j.Append(context.Background(), cp...); err != nil {
				b.Fatal(err)
			}
		}
		return float64(n/batch*batch) / time.Since(t0).Seconds()
	}
	for range b.N {
		base := rate(false)
		with := rate(true)
		b.ReportMetric(base, "none_events/s")
		b.ReportMetric(with, "3sinks_events/s")
		b.ReportMetric(with/base, "ratio")
	}
}
