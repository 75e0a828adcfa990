package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/aggregate"
	"github.com/sandtrail/sandtrail/record/central"
	"github.com/sandtrail/sandtrail/record/central/centraltest"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/index/indextest"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/record/sink"
	"github.com/sandtrail/sandtrail/record/sink/sinktest"
)

// centralPostgres starts the benchmarks' PostgreSQL: centraltest's
// scratch cluster with fsync on (its default, kept), 1 GB of shared
// buffers and checkpoints spaced out for bulk writes.
func centralPostgres(b *testing.B) *centraltest.Postgres {
	b.Helper()
	return centraltest.StartPostgres(b, centraltest.WithSetting("shared_buffers", "1GB"),
		centraltest.WithSetting("max_wal_size", "8GB"), centraltest.WithSetting("checkpoint_timeout", "30min"),
		centraltest.WithSetting("maintenance_work_mem", "512MB"), centraltest.WithSetting("work_mem", "64MB"))
}

const (
	// centralHosts is how many hosts BenchmarkCentralIngest runs side by
	// side, centralHostEvents the events each appends, centralAppend the
	// events of one append.
	centralHosts      = 3
	centralHostEvents = 40 * indexPerSession
	centralAppend     = 256
)

// centralHost is one host of BenchmarkCentralIngest: its name, key and
// journal.
type centralHost struct {
	name string
	key  note.Verifier
	j    *journal.Journal
	dir  string
}

func openCentralHost(b *testing.B, name string) *centralHost {
	b.Helper()
	signer, vs := journaltest.Keys(b, name)
	v, err := vs.Verifier(signer.Name(), signer.KeyHash())
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "journal")
	j, err := journal.Open(dir, signer, journal.WithHost(name))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { j.Close() })
	return &centralHost{name: name, key: v, j: j, dir: dir}
}

// append appends evs (copies, as the host's own) in batches of
// centralAppend, each durable before the next, as the daemon writes.
func (h *centralHost) append(evs []*event.Event) error {
	for i := 0; i < len(evs); i += centralAppend {
		batch := make([]*event.Event, 0, centralAppend)
		for _, e := range evs[i:min(i+centralAppend, len(evs))] {
			c := *e
			c.Host = h.name
			if c.SessionID != "" { // each host's sessions its own, as session ids are
				c.SessionID = h.name + "-" + c.SessionID
			}
			batch = append(batch, &c)
		}
		if err := h.j.Append(context.Background(), batch...); err != nil {
			return err
		}
	}
	return nil
}

// centralIngestEvents are the events each host appends: whole generated
// sessions, so that the last is a session's terminate, on which the
// journal signs a checkpoint of everything before it wakes its followers.
func centralIngestEvents(b *testing.B) []*event.Event {
	var evs []*event.Event
	err := indextest.Generate(indextest.Config{Sessions: centralHostEvents / indexPerSession, PerSession: indexPerSession, Seed: 42},
		func(ev *event.Event) error { evs = append(evs, ev); return nil })
	if err != nil {
		b.Fatal(err)
	}
	if evs[len(evs)-1].Kind != event.KindSessionTerminate {
		b.Fatalf("the generated record ends with a %s, not a terminate", evs[len(evs)-1].Kind)
	}
	return evs
}

// appendAll appends evs on every host at once and returns how long that
// took, the first append to the last one durable.
func appendAll(b *testing.B, hosts []*centralHost, evs []*event.Event) time.Duration {
	b.Helper()
	t0 := time.Now()
	errs := make(chan error, len(hosts))
	for _, h := range hosts {
		go func() { errs <- h.append(evs) }()
	}
	for range hosts {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(t0)
}

// centralRig is the path from the hosts' journals to the central store:
// each host's NATS sink runner, a JetStream stream on the in-process
// server, one aggregator, the store on PostgreSQL with the hosts' keys.
type centralRig struct {
	store   *central.Store
	runners []*sink.Runner
	stop    func()
}

func startCentralRig(b *testing.B, dsn string, hosts []*centralHost) *centralRig {
	b.Helper()
	url := sinktest.StartNATS(b, 0, b.TempDir()).ClientURL()
	keys := central.Keys{}
	for _, h := range hosts {
		keys[h.name] = h.key
	}
	ctx, cancel := context.WithCancel(context.Background())
	store, err := central.Open(ctx, dsn, central.WithKeys(keys))
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var closers []func() error
	var runners []*sink.Runner
	for _, h := range hosts {
		ns, err := sink.NewNATS(ctx, sink.NATSConfig{URL: url, Host: h.name})
		if err != nil {
			b.Fatal(err)
		}
		r, err := sink.NewRunner(sink.Config{Name: "nats", JournalDir: h.dir, CursorDir: b.TempDir()}, ns, h.j)
		if err != nil {
			b.Fatal(err)
		}
		closers = append(closers, ns.Close)
		runners = append(runners, r)
		wg.Go(func() { r.Run(ctx) })
	}
	a, err := aggregate.New(ctx, aggregate.Config{URL: url}, store, hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	wg.Go(func() { a.Run(ctx) })
	return &centralRig{store: store, runners: runners, stop: func() {
		cancel()
		wg.Wait()
		a.Close()
		for _, c := range closers {
			c()
		}
		store.Close()
	}}
}

// waitVerified waits until the store's chain of every host is verified to
// its journal's size, and returns when every sink had published its
// journal.
func (rig *centralRig) waitVerified(b *testing.B, hosts []*centralHost) (published time.Time) {
	b.Helper()
	want := map[string]uint64{}
	for _, h := range hosts {
		want[h.name] = h.j.Size()
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		chains, err := rig.store.Chains(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if published.IsZero() && rig.published(hosts) {
			published = time.Now()
		}
		done := 0
		for _, c := range chains {
			if c.Broken != "" {
				b.Fatalf("host %s's chain is broken: %s", c.Host, c.Broken)
			}
			if c.Verified == want[c.Host] && c.Received == want[c.Host] {
				done++
			}
		}
		if done == len(hosts) && !published.IsZero() {
			return published
		}
		if time.Now().After(deadline) {
			b.Fatalf("chains %+v, want each verified to %v", chains, want)
		}
		time.Sleep(20 * time.Millisecond) // Chains costs the store about 0.3 ms
	}
}

// published says whether every host's sink has sent its whole journal.
func (rig *centralRig) published(hosts []*centralHost) bool {
	for i, r := range rig.runners {
		if r.Status().Cursor < hosts[i].j.Size() {
			return false
		}
	}
	return true
}

// BenchmarkCentralIngest appends the same realistic events
// (indextest.Generate) on centralHosts hosts at once, each into its own
// journal, in appends of centralAppend, durable as the daemon writes them:
// first into the journals alone (the baseline), then with each host's NATS
// sink publishing into a JetStream stream (file storage) and an aggregator
// writing the stream into the central store on PostgreSQL (fsync on) and
// verifying each host's chain against its signed checkpoints. It reports
// the events/s of all the hosts together both ways, the second from the
// first append until every host's chain is verified to its journal's size,
// and their ratio (x-of-journal); and, of the second, the rates until the
// journals had taken every event (appended) and until the sinks had
// published them all (published).
func BenchmarkCentralIngest(b *testing.B) {
	evs := centralIngestEvents(b)
	pg := centralPostgres(b)
	total := float64(centralHosts * len(evs))
	for i := range b.N {
		hosts := make([]*centralHost, centralHosts)
		for k := range hosts {
			hosts[k] = openCentralHost(b, fmt.Sprintf("host-%d", k))
		}
		journalAlone := appendAll(b, hosts, evs)

		hosts = make([]*centralHost, centralHosts)
		for k := range hosts {
			hosts[k] = openCentralHost(b, fmt.Sprintf("host-%d", k))
		}
		rig := startCentralRig(b, pg.CreateDatabase(b, fmt.Sprintf("ingest%d", i)), hosts)
		t0 := time.Now()
		appended := appendAll(b, hosts, evs)
		published := rig.waitVerified(b, hosts).Sub(t0)
		central := time.Since(t0)
		rig.stop()

		b.ReportMetric(total/journalAlone.Seconds(), "journal_events/s")
		b.ReportMetric(total/central.Seconds(), "central_events/s")
		b.ReportMetric(total/appended.Seconds(), "appended_events/s")
		b.ReportMetric(total/published.Seconds(), "published_events/s")
		b.ReportMetric(journalAlone.Seconds()/central.Seconds(), "x-of-journal")
	}
}

// centralLoadBatch is the entries of one central.Store.Write of the load.
const centralLoadBatch = 50_000

// loadCentral writes the benchmark record of n events (the same events as
// indexDB's) into a new central store through Write, in batches of
// centralLoadBatch, then ANALYZEs it, and returns the store and the load's
// rate in events/s.
func loadCentral(b *testing.B, n int) (*central.Store, float64) {
	b.Helper()
	pg := centralPostgres(b)
	ctx := context.Background()
	store, err := central.Open(ctx, pg.DSN())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	t0 := time.Now()
	batches, genErr := indexBatches(n, centralLoadBatch, func(seq uint64, raw []byte) central.Entry {
		return central.Entry{Host: "bench", Seq: seq, Raw: raw}
	})
	for batch := range batches {
		if _, err := store.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-genErr; err != nil {
		b.Fatal(err)
	}
	loaded := time.Since(t0)
	t1 := time.Now()
	if err := pgExec(ctx, pg.DSN(), "ANALYZE"); err != nil {
		b.Fatal(err)
	}
	rate := float64(n) / loaded.Seconds()
	b.Logf("loaded %d events into the central store in %v (%.0f events/s), analyzed in %v",
		n, loaded.Round(time.Second), rate, time.Since(t1).Round(time.Second))
	if rate < 40_000 {
		b.Logf("the load ran below 40k events/s: set SANDTRAIL_BENCH_EVENTS lower to bound the run")
	}
	return store, rate
}

// BenchmarkCentralQuestions times the five incident questions of
// BenchmarkIndexQuestions over the benchmark record in the central store
// (central.Store's Reader on PostgreSQL), the record loaded once through
// central.Store.Write, against the same questions over the same events in
// the SQLite index (indexDB's), timed in the same loop. For each it
// reports the median latency in PostgreSQL (median-ms) and in SQLite
// (sqlite-ms), their ratio (x-of-sqlite), and the answer's size, the same
// both ways; the "load" sub-benchmark reports the load's events/s.
func BenchmarkCentralQuestions(b *testing.B) {
	n := indexBenchEvents(b)
	ix, err := index.Open(indexDB(b, n))
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	store, rate := loadCentral(b, n)
	b.Run("load", func(b *testing.B) {
		for b.Loop() {
		}
		b.ReportMetric(rate, "load_events/s")
	})
	sess, since, until := timelineWindow(b, store.Reader, n)
	for _, q := range incidentQuestions(sess, since, until, 0) {
		b.Run(q.name, func(b *testing.B) {
			f, err := query.Parse(q.args, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			got, want := q.answer(b, store.Reader, f), q.answer(b, &ix.Reader, f)
			if got != want || got == 0 {
				b.Fatalf("%s: the central store answers %d, the SQLite index %d; want the same, and not 0", q.name, got, want)
			}
			var pgTimes, sqliteTimes []time.Duration
			for b.Loop() {
				t := time.Now()
				q.answer(b, store.Reader, f)
				pgTimes = append(pgTimes, time.Since(t))
				b.StopTimer()
				t = time.Now()
				q.answer(b, &ix.Reader, f)
				sqliteTimes = append(sqliteTimes, time.Since(t))
				b.StartTimer()
			}
			slices.Sort(pgTimes)
			slices.Sort(sqliteTimes)
			pg, lite := pgTimes[len(pgTimes)/2], sqliteTimes[len(sqliteTimes)/2]
			b.ReportMetric(float64(pg.Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(lite.Microseconds())/1000, "sqlite-ms")
			b.ReportMetric(float64(pg)/float64(lite), "x-of-sqlite")
			b.ReportMetric(float64(got), "answers")
		})
	}
}

// pgExec runs sql on the database dsn.
func pgExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}
