package bench

import (
	"archive/zip"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sandtrail/sandtrail/policies/intel"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/query"
)

// huntGenVersion names huntDB's output; bump it when it changes.
const huntGenVersion = 2

// The shape of the hunt's record: per session of indexPerSession events,
// huntPkgs packages installed (a pkg.install and a pkg.fetch each),
// huntDNS lookups and huntConnects connections; the rest are execs. One
// session in huntSuspectEvery installs a listed package and looks up and
// connects to its indicators.
const (
	huntPkgs         = 10
	huntDNS          = 100
	huntConnects     = 50
	huntSuspectEvery = 100
	huntPackagePool  = 20000 // distinct name@versions of the record
	huntDomainPool   = 5000
	huntRecords      = 50000 // records in the store, 1% of them names the record has
)

var huntT0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// huntDB returns the path of an index of n events shaped for the hunt,
// written straight into SQLite in bulk (rows, not index.Add: 10^7 events
// through the real path take minutes more) and cached under results/.
// Its files, paths and rollup tables stay empty: the hunt reads none.
func huntDB(b *testing.B, n int) string {
	b.Helper()
	if err := os.MkdirAll("results", 0o755); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join("results", fmt.Sprintf("hunt-%d-s%d-g%d.db", n, index.SchemaVersion, huntGenVersion))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	tmp := path + ".building"
	for _, s := range []string{"", "-wal", "-shm"} {
		os.Remove(tmp + s)
	}
	start := time.Now()
	ix, err := index.Open(tmp, index.WithBulk())
	if err != nil {
		b.Fatal(err)
	}
	ix.Close()
	db, err := sql.Open("sqlite", "file:"+tmp+"?_pragma=synchronous(OFF)&_pragma=cache_size(-1048576)&_pragma=journal_mode(WAL)")
	if err != nil {
		b.Fatal(err)
	}
	if err := fillHuntDB(db, n); err != nil {
		b.Fatal(err)
	}
	db.Close()
	loaded := time.Since(start)
	if ix, err = index.Open(tmp, index.WithBulk(), index.WithCacheSize(1<<20)); err != nil {
		b.Fatal(err)
	}
	if err := ix.Finish(context.Background()); err != nil {
		b.Fatal(err)
	}
	ix.Close()
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	b.Logf("built %s: %d events, rows in %v, indexes in %v", path, n, loaded.Round(time.Second), (time.Since(start) - loaded).Round(time.Second))
	return path
}

// batch inserts rows into one table, many rows per INSERT: a statement
// costs more than a row.
type batch struct {
	tx   *sql.Tx
	head string // INSERT INTO t(cols) VALUES
	cols int
	args []any
}

const batchRows = 100

func (b *batch) add(vals ...any) error {
	b.args = append(b.args, vals...)
	if len(b.args) >= batchRows*b.cols {
		return b.flush()
	}
	return nil
}

func (b *batch) flush() error {
	if len(b.args) == 0 {
		return nil
	}
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", b.cols), ",") + ")"
	q := b.head + strings.TrimSuffix(strings.Repeat(row+",", len(b.args)/b.cols), ",")
	_, err := b.tx.Exec(q, b.args...)
	b.args = b.args[:0]
	return err
}

// huntRows inserts the rows of the hunt's record.
type huntRows struct {
	tx                                 *sql.Tx
	ev, net, pkg, sess, packages, doms *batch
}

func fillHuntDB(db *sql.DB, n int) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	mk := func(head string, cols int) *batch { return &batch{tx: tx, head: head, cols: cols} }
	r := &huntRows{tx: tx,
		ev:       mk(`INSERT INTO events(seq, ts, sid, kind, source, pid, exe, raw) VALUES`, 8),
		net:      mk(`INSERT INTO nets(seq, sid, ts, domain_id, dst_ip, dst_port) VALUES`, 6),
		pkg:      mk(`INSERT INTO pkgs(seq, sid, ts, pkg_id, purl) VALUES`, 5),
		sess:     mk(`INSERT INTO sessions(sid, session_id, events) VALUES`, 3),
		packages: mk(`INSERT INTO packages(id, ecosystem, name, version) VALUES`, 4),
		doms:     mk(`INSERT INTO domains(id, rdomain) VALUES`, 2),
	}
	if err := r.dictionaries(); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(7, 11))
	sessions := n / indexPerSession
	for s := 0; s < sessions; s++ {
		if err := r.session(rng, s); err != nil {
			return err
		}
	}
	for _, b := range []*batch{r.ev, r.net, r.pkg, r.sess, r.packages, r.doms} {
		if err := b.flush(); err != nil {
			return err
		}
	}
	// The execs, the rest of every session, generated inside SQLite.
	if _, err := tx.Exec(`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < ?)
		INSERT INTO events(seq, ts, sid, kind, source, pid, exe, raw)
		SELECT i, ? + i * 1000000, i / ? + 1, ?, 'kernel', 4242, '/usr/bin/node', ? FROM s WHERE i % ? >= ?`,
		sessions*indexPerSession, huntT0.UnixNano(), indexPerSession, event.KindExec, string(huntExecRaw),
		indexPerSession, huntOthers); err != nil {
		return err
	}
	if _, err := tx.Exec(`INSERT INTO meta(key, value) VALUES('next', ?)`, sessions*indexPerSession); err != nil {
		return err
	}
	return tx.Commit()
}

// huntOthers is how many events of a session are not execs.
const huntOthers = 2*huntPkgs + huntDNS + huntConnects

// huntName is the package of the pool's id: a listed one for the ids
// past huntPackagePool.
func huntName(id int) (name, version string) {
	if id >= huntPackagePool {
		return fmt.Sprintf("mal-%d", id-huntPackagePool), "1.0.0"
	}
	return fmt.Sprintf("pkg-%d", id/4), fmt.Sprintf("1.%d.0", id%4)
}

func (r *huntRows) dictionaries() error {
	for id := 0; id < huntPackagePool+huntRecords/100; id++ {
		name, version := huntName(id)
		if err := r.packages.add(id+1, "npm", name, version); err != nil {
			return err
		}
	}
	for id := 0; id < huntDomainPool; id++ {
		if err := r.doms.add(id+1, fmt.Sprintf("com.example.d%d", id)); err != nil {
			return err
		}
	}
	for id := 0; id < 100; id++ {
		if err := r.doms.add(huntDomainPool+id+1, fmt.Sprintf("example.evil.c2-%d", id)); err != nil {
			return err
		}
	}
	return nil
}

var huntExecRaw, _ = event.Marshal(&event.Event{V: event.SchemaVersion, TS: huntT0, SessionID: "sess-0000000", Kind: event.KindExec,
	Source: event.SourceKernel, Proc: &event.Proc{Pid: 4242, PPid: 4241, Exe: "/usr/bin/node",
		Argv: []string{"node", "/home/agent/work/node_modules/.bin/tsc", "-p", "."}, Cwd: "/home/agent/work"}})

// session writes one session's indexPerSession events.
func (r *huntRows) session(rng *rand.Rand, s int) error {
	sid := int64(s + 1)
	id := fmt.Sprintf("sess-%07d", s)
	if err := r.sess.add(sid, id, indexPerSession); err != nil {
		return err
	}
	suspect := s%huntSuspectEvery == huntSuspectEvery/2
	base := int64(s * indexPerSession)
	for i := int64(0); i < huntOthers; i++ {
		seq, ts := base+i, huntT0.Add(time.Duration(base+i)*time.Millisecond)
		var err error
		switch {
		case i < 2*huntPkgs:
			pkg := rng.IntN(huntPackagePool)
			if suspect && i < 2 {
				pkg = huntPackagePool + (s/huntSuspectEvery)%(huntRecords/100)
			}
			err = r.pkgEvent(seq, sid, id, ts, pkg, i%2 == 0)
		case i < 2*huntPkgs+huntDNS:
			dom := rng.IntN(huntDomainPool)
			if suspect && i == 2*huntPkgs {
				dom = huntDomainPool + (s/huntSuspectEvery)%100
			}
			err = r.netEvent(seq, sid, id, ts, dom, "")
		default:
			ip := fmt.Sprintf("10.%d.%d.%d", rng.IntN(8), rng.IntN(256), rng.IntN(256))
			if suspect && i == 2*huntPkgs+huntDNS {
				ip = fmt.Sprintf("203.0.113.%d", (s/huntSuspectEvery)%100)
			}
			err = r.netEvent(seq, sid, id, ts, -1, ip)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *huntRows) pkgEvent(seq, sid int64, sess string, ts time.Time, pkg int, install bool) error {
	name, version := huntName(pkg)
	e := &event.Event{V: event.SchemaVersion, Seq: uint64(seq), TS: ts, SessionID: sess, Kind: event.KindPkgFetch, Source: event.SourceMirror,
		Pkg: &event.Pkg{Ecosystem: "npm", Name: name, Resolved: version, Outcome: "served",
			SourceURL: "https://registry.npmjs.org/" + name + "/-/" + name + "-" + version + ".tgz", Hash: "sha256:" + fmt.Sprintf("%064x", pkg)}}
	if install {
		e.Kind, e.Source, e.Pkg.Outcome = event.KindPkgInstall, event.SourceShim, ""
	}
	raw, err := event.Marshal(e)
	if err != nil {
		return err
	}
	if err := r.ev.add(seq, ts.UnixNano(), sid, e.Kind, string(e.Source), nil, nil, raw); err != nil {
		return err
	}
	return r.pkg.add(seq, sid, ts.UnixNano(), pkg+1, nil)
}

// netEvent writes a lookup of domain dom (an index of the domains
// dictionary) or, with dom -1, a connection to ip.
func (r *huntRows) netEvent(seq, sid int64, sess string, ts time.Time, dom int, ip string) error {
	e := &event.Event{V: event.SchemaVersion, Seq: uint64(seq), TS: ts, SessionID: sess, Kind: event.KindNetConnect, Source: event.SourceKernel,
		Proc: &event.Proc{Pid: 4242}, Net: &event.Net{Op: "connect", Proto: "tcp", DstIP: ip, DstPort: 443}}
	var domID, dst, port any
	if dom >= 0 {
		name := fmt.Sprintf("d%d.example.com", dom)
		if dom >= huntDomainPool {
			name = fmt.Sprintf("c2-%d.evil.example", dom-huntDomainPool)
		}
		e.Kind, e.Net = event.KindNetDNS, &event.Net{Op: "dns", Proto: "udp", DNS: &event.DNS{Query: name}}
		domID = dom + 1
	} else {
		dst, port = ip, 443
	}
	raw, err := event.Marshal(e)
	if err != nil {
		return err
	}
	if err := r.ev.add(seq, ts.UnixNano(), sid, e.Kind, string(e.Source), 4242, nil, raw); err != nil {
		return err
	}
	return r.net.add(seq, sid, ts.UnixNano(), domID, dst, port)
}

// huntStore is an intel store of huntRecords records: npm names at every
// version, the first 1% of them names the record has, and 100 of them with
// a domain (*.evil.example) and an address, imported from an all.zip.
func huntStore(b *testing.B) *intel.Store {
	b.Helper()
	dir := b.TempDir()
	zpath := filepath.Join(dir, "npm", "all.zip")
	if err := os.MkdirAll(filepath.Dir(zpath), 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(zpath)
	if err != nil {
		b.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for i := 0; i < huntRecords; i++ {
		iocs := ""
		if i < 100 {
			iocs = fmt.Sprintf(`,"database_specific":{"iocs":{"domains":["c2-%d.evil.example"],"ip_addresses":["203.0.113.%d"]}}`, i, i)
		}
		w, err := zw.Create(fmt.Sprintf("MAL-2025-%d.json", i))
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(w, `{"id":"MAL-2025-%d","modified":"2025-11-01T00:00:00Z","summary":"Malicious code in mal-%d (npm)",`+
			`"affected":[{"package":{"ecosystem":"npm","name":"mal-%d"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"}]}]}]%s}`, i, i, i, iocs)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	s, err := intel.Open(filepath.Join(dir, "intel.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	t0 := time.Now()
	c, err := s.Import(context.Background(), zpath)
	if err != nil || c.Kept != huntRecords {
		b.Fatalf("importing the store: %+v, %v", c, err)
	}
	b.Logf("imported %d records in %v", c.Kept, time.Since(t0).Round(time.Millisecond))
	return s
}

// BenchmarkHunt times `sandtrail hunt`'s search (intel.Hunt) over a record
// of SANDTRAIL_BENCH_EVENTS events (default 10^7) with a store of
// huntRecords records. Two baselines are measured in the same run, both
// plain indexed SELECTs over the same events table: reading the pkg.install
// and pkg.fetch events through the kind index (Index.Each, as `query --kind`
// reads them: the set a hunt without the dictionaries would start from),
// and counting them through the same index without reading a row (the
// floor of any question about them). It reports the medians and the ratios.
func BenchmarkHunt(b *testing.B) {
	n := indexBenchEvents(b)
	path := huntDB(b, n)
	s := huntStore(b)
	ix, err := index.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	ctx := context.Background()
	baseline := func() int {
		var c int
		if err := ix.Each(ctx, query.Filter{Kinds: []query.Kind{{Name: event.KindPkgInstall}, {Name: event.KindPkgFetch}}, Limit: 0},
			func(index.Hit) error { c++; return nil }); err != nil {
			b.Fatal(err)
		}
		return c
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	count := func() {
		var c int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE kind IN (?, ?)`, event.KindPkgInstall, event.KindPkgFetch).Scan(&c); err != nil || c == 0 {
			b.Fatalf("counting pkg events: %d, %v", c, err)
		}
	}
	var hunts, bases, counts []time.Duration
	var found int
	for b.Loop() {
		t := time.Now()
		fs, err := intel.Hunt(ctx, s, ix, time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		hunts = append(hunts, time.Since(t))
		found = len(fs)
		t = time.Now()
		baseline()
		bases = append(bases, time.Since(t))
		t = time.Now()
		count()
		counts = append(counts, time.Since(t))
	}
	median := func(ds []time.Duration) time.Duration { slices.Sort(ds); return ds[len(ds)/2] }
	hm, bm, cm := median(hunts), median(bases), median(counts)
	b.ReportMetric(float64(hm.Microseconds())/1000, "hunt-ms")
	b.ReportMetric(float64(bm.Microseconds())/1000, "read-ms")
	b.ReportMetric(float64(cm.Microseconds())/1000, "count-ms")
	b.ReportMetric(float64(hm)/float64(bm), "hunt/read")
	b.ReportMetric(float64(hm)/float64(cm), "hunt/count")
	b.ReportMetric(float64(found), "findings")
}
