package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/index/indextest"
	"github.com/sandtrail/sandtrail/record/query"
)

// indexGenVersion names the generator's output; bump it when
// record/index/indextest changes what it generates, so that cached
// databases are rebuilt.
const indexGenVersion = 2

// indexBenchEvents is the size of the benchmark record:
// SANDTRAIL_BENCH_EVENTS, default 10^7.
func indexBenchEvents(b *testing.B) int {
	n := 10_000_000
	if s := os.Getenv("SANDTRAIL_BENCH_EVENTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 10_000 {
			b.Fatalf("SANDTRAIL_BENCH_EVENTS=%q: want a number of events, at least 10000", s)
		}
		n = v
	}
	return n
}

// indexPerSession is the number of events of each generated session.
const indexPerSession = 1000

// indexDB returns the path of a benchmark index of n events, building it
// (through index.Add, the real path) the first time and caching it under
// results/, keyed by size, index schema and generator version.
func indexDB(b *testing.B, n int) string {
	b.Helper()
	dir := "results"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("index-%d-s%d-g%d.db", n, index.SchemaVersion, indexGenVersion))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	tmp := path + ".building"
	for _, s := range []string{"", "-wal", "-shm"} {
		os.Remove(tmp + s)
	}
	start := time.Now()
	ix, err := index.Open(tmp, index.WithBulk(), index.WithCacheSize(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	batches, genErr := indexBatches(n, 20000, func(seq uint64, raw []byte) index.Entry { return index.Entry{Seq: seq, Raw: raw} })
	for batch := range batches {
		if err := ix.Add(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-genErr; err != nil {
		b.Fatal(err)
	}
	loaded := time.Since(start)
	if err := ix.Finish(ctx); err != nil {
		b.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	b.Logf("built %s: %d events, loaded in %v, indexed in %v", path, n, loaded.Round(time.Second), (time.Since(start) - loaded).Round(time.Second))
	return path
}

// indexBatches generates the benchmark record of n events (Seed 42,
// indexPerSession events a session: the same events whatever reads them)
// in a goroutine, each event stored as the journal stores it and made into
// a T by mk, in batches of size; the error channel gets the generator's
// result once the batches' channel is closed.
func indexBatches[T any](n, size int, mk func(seq uint64, raw []byte) T) (<-chan []T, <-chan error) {
	batches := make(chan []T, 4)
	genErr := make(chan error, 1)
	go func() {
		defer close(batches)
		batch := make([]T, 0, size)
		genErr <- indextest.Generate(indextest.Config{Sessions: n / indexPerSession, PerSession: indexPerSession, Seed: 42},
			func(ev *event.Event) error {
				raw, err := event.Marshal(ev)
				if err != nil {
					return err
				}
				batch = append(batch, mk(ev.Seq, raw))
				if len(batch) == size {
					batches <- batch
					batch = make([]T, 0, size)
				}
				return nil
			})
		if len(batch) > 0 {
			batches <- batch
		}
	}()
	return batches, genErr
}

// indexQuestion is one incident question, answered through the index (as
// `sandtrail sessions|query` does) and by a full scan of the table that the
// index serves (the baseline).
type indexQuestion struct {
	name string
	args query.Args
	// events asks for the events (Query) rather than the sessions.
	events bool
	// scan answers the same question without any index.
	scan string
	// scanArgs are scan's arguments.
	scanArgs []any
}

// timelineWindow is the timeline question's session and window: the
// session in the middle of the record of n events, and the middle half of
// its life, as r finds them.
func timelineWindow(b *testing.B, r *index.Reader, n int) (sess string, since, until time.Time) {
	b.Helper()
	sess = indextest.SessionID(n / indexPerSession / 2)
	ss, err := r.Sessions(context.Background(), query.Filter{Session: sess})
	if err != nil || len(ss) != 1 {
		b.Fatalf("Sessions(%s) = %v, %v", sess, ss, err)
	}
	life := ss[0].Last.Sub(ss[0].First)
	return sess, ss[0].First.Add(life / 4), ss[0].Last.Add(-life / 4)
}

// incidentQuestions are the five incident questions over the benchmark
// record (the timeline of sess from since to until), with their full
// scans of the SQLite index (sid being sess's there).
func incidentQuestions(sess string, since, until time.Time, sid int64) []indexQuestion {
	return []indexQuestion{
		{name: "1-path-prefix", args: query.Args{Path: "/home/agent/.ssh"},
			scan:     `SELECT DISTINCT f.sid FROM files f NOT INDEXED CROSS JOIN paths p ON p.id = f.path_id WHERE p.path = ? OR (p.path >= ? AND p.path < ?)`,
			scanArgs: []any{"/home/agent/.ssh", "/home/agent/.ssh/", "/home/agent/.ssh0"}},
		{name: "1-path-glob", args: query.Args{Path: "/home/*/.ssh/id_*"},
			scan:     `SELECT DISTINCT f.sid FROM files f NOT INDEXED CROSS JOIN paths p ON p.id = f.path_id WHERE p.path GLOB '/home/*/.ssh/id_*' AND p.path NOT GLOB '/home/*/*/*/*'`,
			scanArgs: nil},
		{name: "2-domain-suffix", args: query.Args{Domain: "*.evil.example"},
			scan:     `SELECT DISTINCT n.sid FROM nets n NOT INDEXED CROSS JOIN domains d ON d.id = n.domain_id WHERE d.rdomain >= ? AND d.rdomain < ?`,
			scanArgs: []any{"example.evil.", "example.evil/"}},
		{name: "3-package-exact", args: query.Args{Package: "npm:lodash@4.17.20"},
			scan:     `SELECT DISTINCT k.sid FROM pkgs k NOT INDEXED CROSS JOIN packages p ON p.id = k.pkg_id WHERE p.ecosystem = 'npm' AND p.name = 'lodash' AND p.version = '4.17.20'`,
			scanArgs: nil},
		{name: "3-package-range", args: query.Args{Package: "npm:lodash@>=4.17.19 <4.17.21"},
			scan:     `SELECT DISTINCT k.sid FROM pkgs k NOT INDEXED CROSS JOIN packages p ON p.id = k.pkg_id WHERE p.ecosystem = 'npm' AND p.name = 'lodash' AND p.version IN ('4.17.19', '4.17.20')`,
			scanArgs: nil},
		{name: "4-end-reason", args: query.Args{Reason: "oom"},
			scan:     `SELECT DISTINCT sid FROM events NOT INDEXED WHERE kind = 'session.terminate' AND json_extract(raw, '$.session.reason') = 'oom'`,
			scanArgs: nil},
		{name: "5-timeline", events: true,
			args:     query.Args{Session: sess, Since: since.Format(time.RFC3339Nano), Until: until.Format(time.RFC3339Nano)},
			scan:     `SELECT seq FROM events NOT INDEXED WHERE sid = ? AND ts >= ? AND ts < ? ORDER BY ts, seq`,
			scanArgs: []any{sid, since.UnixNano(), until.UnixNano()}},
	}
}

// answer answers q's filter f through r, as `sandtrail sessions|query`
// does, and returns the answer's size.
func (q indexQuestion) answer(b *testing.B, r *index.Reader, f query.Filter) int {
	if q.events {
		hits, err := r.Query(context.Background(), f)
		if err != nil {
			b.Fatal(err)
		}
		return len(hits)
	}
	ss, err := r.Sessions(context.Background(), f)
	if err != nil {
		b.Fatal(err)
	}
	return len(ss)
}

// BenchmarkIndexQuestions times the five incident questions over the
// benchmark record. For each it reports the latency through the index
// (ms/op), the latency of the same answer by a full table scan measured in
// the same run (scan-ms), their ratio (x-vs-scan), and the answer's size.
func BenchmarkIndexQuestions(b *testing.B) {
	n := indexBenchEvents(b)
	path := indexDB(b, n)
	ix, err := index.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=cache_size(-1048576)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	sess, since, until := timelineWindow(b, &ix.Reader, n)
	var sid int64
	if err := db.QueryRow(`SELECT sid FROM sessions WHERE session_id = ?`, sess).Scan(&sid); err != nil {
		b.Fatal(err)
	}
	questions := incidentQuestions(sess, since, until, sid)
	for _, q := range questions {
		b.Run(q.name, func(b *testing.B) {
			f, err := query.Parse(q.args, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			answer := func() int { return q.answer(b, &ix.Reader, f) }
			// The baseline, timed once per run (a full scan takes seconds);
			// its answer must be the same size as the index's.
			t0 := time.Now()
			rows, err := db.QueryContext(ctx, q.scan, q.scanArgs...)
			if err != nil {
				b.Fatal(err)
			}
			scanned := 0
			for rows.Next() {
				scanned++
			}
			rows.Close()
			scanTime := time.Since(t0)
			got := answer()
			if got != scanned || got == 0 {
				b.Fatalf("%s: index answers %d, full scan %d; want the same, and not 0", q.name, got, scanned)
			}
			var times []time.Duration
			for b.Loop() {
				t := time.Now()
				answer()
				times = append(times, time.Since(t))
			}
			slices.Sort(times)
			med := times[len(times)/2]
			b.ReportMetric(float64(med.Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(scanTime.Microseconds())/1000, "scan-ms")
			b.ReportMetric(float64(scanTime)/float64(med), "x-vs-scan")
			b.ReportMetric(float64(got), "answers")
		})
	}
	// The floor: one event by its seq, the cheapest read there is.
	b.Run("floor-pk-lookup", func(b *testing.B) {
		var raw string
		i := 0
		for b.Loop() {
			i = (i + 7919) % n
			if err := db.QueryRowContext(ctx, `SELECT raw FROM events WHERE seq = ?`, i).Scan(&raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
