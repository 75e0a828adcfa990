// Package index is the SQLite index of the sandtrail journal, built for the
// five incident questions:
//
//  1. which sessions accessed a path (a prefix or a glob),
//  2. which sessions connected to a domain (exact or *.suffix),
//  3. which sessions installed a package (exact version, purl or range),
//  4. which sessions ended with a given reason,
//  5. what one session did in a time window (its timeline).
//
// The journal (record/journal) is the truth; the index is derived from it
// and can be thrown away and rebuilt (Reindex). Every event is stored with
// its seq, time (unix nanoseconds), session, kind, source, pid, exe and its
// canonical JSON; side tables hold the file paths, the reversed domain
// names ("com.example.www", so that a suffix is a prefix) and the packages
// of the events, each with a covering index, keyed through dictionaries of
// the distinct paths, domains and packages. Rollups record which sessions
// have any event of each key, and a sessions table keeps a summary of every
// session (first and last time, event counts, end reason and exit status),
// all maintained on insert.
//
// Adding is idempotent: an entry whose seq is already indexed is skipped,
// so catching up after a crash, or two processes catching up at once, never
// counts an event twice. The cursor (Last) is the highest seq handled.
//
// Trust model: the index holds only what the journal holds. It is not
// tamper-evident itself; verify answers against the journal with
// `sandtrail verify`, and rebuild the index when in doubt.
package index

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/resolver"
)

// SchemaVersion is the version of the index schema, kept in SQLite's
// user_version. An index of another version must be rebuilt.
const SchemaVersion = 5

// Errors returned by the index.
var (
	// ErrSchema means the index file was written by another schema
	// version; rebuild it with `sandtrail reindex`.
	ErrSchema = errors.New("index: schema version mismatch")
	// ErrNoJournal means the journal directory does not exist.
	ErrNoJournal = errors.New("index: no journal")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("index: closed")
	// ErrStale means the journal no longer holds the last entry the index
	// took from it, byte for byte: the journal was replaced or cut back.
	// Rebuild the index (Reindex).
	ErrStale = errors.New("index: does not match the journal")
)

// Entry is one journal entry to index: its seq and the canonical JSON of
// its event.
type Entry struct {
	Seq uint64
	Raw []byte
}

// ScanFunc reads complete journal entries in order, starting at seq from
// (journal.Scan). raw is only valid during the call.
type ScanFunc func(dir string, from uint64, fn func(seq uint64, raw []byte) error) error

// Option configures Open.
type Option func(*options)

type options struct {
	log   hclog.Logger
	scan  ScanFunc
	bulk  bool
	batch int
	cache int
}

// WithLogger sets the logger (default: none).
func WithLogger(l hclog.Logger) Option { return func(o *options) { o.log = l } }

// WithScanner sets how the journal is read (default journal.Scan).
func WithScanner(s ScanFunc) Option { return func(o *options) { o.scan = s } }

// WithBulk opens the index for a one-off bulk load into a fresh file: no
// fsync at all (synchronous=OFF) and the secondary indexes built once at
// Finish rather than row by row. Use it only for a file that is thrown
// away if the process dies, as Reindex does.
func WithBulk() Option { return func(o *options) { o.bulk = true } }

// WithBatchSize sets how many journal entries go into one transaction when
// catching up (default 4096).
func WithBatchSize(n int) Option { return func(o *options) { o.batch = n } }

// WithCacheSize sets SQLite's page cache in KiB (default 65536, 64 MiB).
func WithCacheSize(kib int) Option { return func(o *options) { o.cache = kib } }

// Index is an open index file. Its methods are safe for concurrent use;
// writes are serialized.
type Index struct {
	db   *sql.DB
	path string
	log  hclog.Logger
	o    options

	mu     sync.Mutex // serializes writers and guards the dictionaries, closed
	dicts  [4]*dict   // sessions, paths, domains, packages
	closed bool
}

// tables holds the schema, secondary indexes apart (see indexes).
var tables = []string{
	`CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS sessions(
		sid INTEGER PRIMARY KEY,
		session_id TEXT NOT NULL UNIQUE,
		first_ts INTEGER, last_ts INTEGER,
		events INTEGER NOT NULL DEFAULT 0,
		procs INTEGER NOT NULL DEFAULT 0,
		files INTEGER NOT NULL DEFAULT 0,
		nets INTEGER NOT NULL DEFAULT 0,
		pkgs INTEGER NOT NULL DEFAULT 0,
		alerts INTEGER NOT NULL DEFAULT 0,
		lost INTEGER NOT NULL DEFAULT 0,
		end_ts INTEGER, end_reason TEXT, exit_status INTEGER)`,
	`CREATE TABLE IF NOT EXISTS events(
		seq INTEGER PRIMARY KEY,
		ts INTEGER NOT NULL,
		sid INTEGER NOT NULL,
		kind TEXT NOT NULL,
		source TEXT NOT NULL,
		pid INTEGER,
		exe TEXT,
		raw TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS paths(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE)`,
	`CREATE TABLE IF NOT EXISTS domains(id INTEGER PRIMARY KEY, rdomain TEXT NOT NULL UNIQUE)`,
	`CREATE TABLE IF NOT EXISTS packages(id INTEGER PRIMARY KEY, ecosystem TEXT NOT NULL, name TEXT NOT NULL,
		version TEXT NOT NULL, UNIQUE(ecosystem, name, version))`,
	`CREATE TABLE IF NOT EXISTS files(seq INTEGER NOT NULL, sid INTEGER NOT NULL, ts INTEGER NOT NULL, path_id INTEGER NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS nets(seq INTEGER NOT NULL, sid INTEGER NOT NULL, ts INTEGER NOT NULL,
		domain_id INTEGER, dst_ip TEXT, dst_port INTEGER)`,
	`CREATE TABLE IF NOT EXISTS pkgs(seq INTEGER NOT NULL, sid INTEGER NOT NULL, ts INTEGER NOT NULL,
		pkg_id INTEGER NOT NULL, purl TEXT)`,
	`CREATE TABLE IF NOT EXISTS skipped(seq INTEGER PRIMARY KEY, error TEXT NOT NULL)`,
	// The rollups: which sessions have any row of a key. "Which sessions
	// installed X" reads one row per session here instead of one per
	// event in the side table.
	`CREATE TABLE IF NOT EXISTS path_sessions(path_id INTEGER NOT NULL, sid INTEGER NOT NULL, PRIMARY KEY(path_id, sid)) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS domain_sessions(domain_id INTEGER NOT NULL, sid INTEGER NOT NULL, PRIMARY KEY(domain_id, sid)) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS pkg_sessions(pkg_id INTEGER NOT NULL, sid INTEGER NOT NULL, PRIMARY KEY(pkg_id, sid)) WITHOUT ROWID`,
}

// indexes are the secondary indexes, one or more per question. Each side
// table's index covers its questions, so they never touch the table. The
// dictionaries (paths, domains, packages) have their UNIQUE indexes from
// the start: a filter first finds the matching keys there (a range of
// paths, the versions of a package), then the side rows of those keys.
var indexes = []string{
	`CREATE INDEX IF NOT EXISTS events_sid_ts ON events(sid, ts)`,     // 5: the timeline
	`CREATE INDEX IF NOT EXISTS events_ts ON events(ts)`,              // time windows
	`CREATE INDEX IF NOT EXISTS events_kind ON events(kind, ts, sid)`, // --kind, and which sessions had one
	`CREATE INDEX IF NOT EXISTS files_path ON files(path_id, sid, ts, seq)`,
	`CREATE INDEX IF NOT EXISTS nets_domain ON nets(domain_id, sid, ts, seq) WHERE domain_id IS NOT NULL`,
	`CREATE INDEX IF NOT EXISTS pkgs_pkg ON pkgs(pkg_id, sid, ts, seq)`,
	`CREATE INDEX IF NOT EXISTS sessions_reason ON sessions(end_reason) WHERE end_reason IS NOT NULL`,
}

// Open opens or creates the index at path. It returns an error wrapping
// ErrSchema for a file of another schema version.
func Open(path string, opts ...Option) (*Index, error) {
	o := options{log: hclog.NewNullLogger(), batch: 4096, cache: 65536}
	for _, opt := range opts {
		opt(&o)
	}
	if o.batch <= 0 {
		o.batch = 4096
	}
	if o.scan == nil {
		o.scan = journalScan
	}
	sync := "NORMAL"
	if o.bulk {
		sync = "OFF"
	}
	// The index holds the whole record in clear: create it private, and
	// SQLite gives its -wal and -shm files the same mode.
	if f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600); err == nil {
		f.Close()
	} else {
		return nil, fmt.Errorf("opening index %s: %w", path, err)
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	dsn := fmt.Sprintf("file:%s?_txlock=immediate&_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)"+
		"&_pragma=synchronous(%s)&_pragma=cache_size(-%d)&_pragma=temp_store(MEMORY)&_pragma=mmap_size(268435456)",
		esc, sync, o.cache)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("opening index %s: %w", path, err)
	}
	ix := &Index{db: db, path: path, log: o.log.Named("index"), o: o}
	for i := range ix.dicts {
		ix.dicts[i] = newDict()
	}
	if err := ix.init(); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening index %s: %w", path, err)
	}
	return ix, nil
}

func (ix *Index) init() error {
	ctx := context.Background()
	var v int
	if err := ix.db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	var n int
	if err := ix.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table'`).Scan(&n); err != nil {
		return fmt.Errorf("reading schema: %w", err)
	}
	if n > 0 && v != SchemaVersion {
		return fmt.Errorf("%w: file has %d, this build %d; run sandtrail reindex", ErrSchema, v, SchemaVersion)
	}
	stmts := tables
	if !ix.o.bulk {
		stmts = append(append([]string(nil), tables...), indexes...)
	}
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("creating schema: %w", err)
	}
	defer tx.Rollback()
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("creating schema: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, SchemaVersion)); err != nil {
		return fmt.Errorf("creating schema: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("creating schema: %w", err)
	}
	return nil
}

// Finish builds the secondary indexes of an index opened WithBulk and
// refreshes the planner's statistics. It is cheap on an index that has
// them already.
func (ix *Index) Finish(ctx context.Context) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, s := range indexes {
		if _, err := ix.db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("building indexes: %w", err)
		}
	}
	// analysis_limit bounds the statistics pass on a large index.
	if _, err := ix.db.ExecContext(ctx, `PRAGMA analysis_limit=1000; PRAGMA optimize=0x10002`); err != nil {
		return fmt.Errorf("analyzing index: %w", err)
	}
	return nil
}

// Path returns the file name of the index.
func (ix *Index) Path() string { return ix.path }

// Close closes the index. The last connection to close checkpoints the
// write-ahead log into the file.
func (ix *Index) Close() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return nil
	}
	ix.closed = true
	if err := ix.db.Close(); err != nil {
		return fmt.Errorf("closing index: %w", err)
	}
	return nil
}

// Last returns the highest seq the index has handled (indexed, or skipped
// as undecodable); ok is false for an empty index.
func (ix *Index) Last() (seq uint64, ok bool) {
	next, err := ix.next(context.Background(), ix.db)
	if err != nil || next == 0 {
		return 0, false
	}
	return next - 1, true
}

type querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// next returns the seq after the cursor.
func (ix *Index) next(ctx context.Context, q querier) (uint64, error) {
	var v int64
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'next'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading cursor: %w", err)
	}
	return uint64(v), nil
}

// row is what Add extracts from one event.
type row struct {
	ev  event.Event
	sid int64
}

// sessionAgg accumulates one batch's changes to a session summary.
type sessionAgg struct {
	first, last                              int64
	events, procs, files, nets, pkgs, alerts int64
	lost                                     int64 // the counts of its loss events
	endTS                                    int64
	ended                                    bool
	endReason                                string
	exitStatus                               *int32
}

// Add indexes a batch of entries in one transaction. Entries already
// indexed are skipped. An entry that does not decode as an event is
// recorded as skipped (see Skipped) rather than failing the batch, so one
// bad entry cannot stop the index; the cursor moves past both.
func (ix *Index) Add(ctx context.Context, batch []Entry) error {
	if len(batch) == 0 {
		return nil
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return ErrClosed
	}
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("adding to index: %w", err)
	}
	defer tx.Rollback()
	err = ix.add(ctx, tx, batch)
	if err != nil {
		for _, d := range ix.dicts {
			d.rollback()
		}
		return fmt.Errorf("adding to index: %w", err)
	}
	if err := tx.Commit(); err != nil {
		for _, d := range ix.dicts {
			d.rollback()
		}
		return fmt.Errorf("adding to index: committing: %w", err)
	}
	for _, d := range ix.dicts {
		d.commit()
	}
	return nil
}

type stmts struct {
	ev, file, net, pkg, skip, sessUpd *sql.Stmt
	// roll adds a (key, sid) pair to a rollup, by dictionary.
	roll [4]*sql.Stmt
	// ins and get add a key to a dictionary and read its id, by dictionary.
	ins, get [4]*sql.Stmt
}

// The dictionaries, by index in Index.dicts and stmts.ins/get.
const (
	dictSession = iota
	dictPath
	dictDomain
	dictPackage
)

func prepare(ctx context.Context, tx *sql.Tx) (*stmts, error) {
	var s stmts
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{
		{&s.ev, `INSERT OR IGNORE INTO events(seq, ts, sid, kind, source, pid, exe, raw) VALUES(?, ?, ?, ?, ?, ?, ?, ?)`},
		{&s.file, `INSERT INTO files(seq, sid, ts, path_id) VALUES(?, ?, ?, ?)`},
		{&s.net, `INSERT INTO nets(seq, sid, ts, domain_id, dst_ip, dst_port) VALUES(?, ?, ?, ?, ?, ?)`},
		{&s.pkg, `INSERT INTO pkgs(seq, sid, ts, pkg_id, purl) VALUES(?, ?, ?, ?, ?)`},
		{&s.skip, `INSERT OR IGNORE INTO skipped(seq, error) SELECT ?, ? WHERE NOT EXISTS (SELECT 1 FROM events WHERE seq = ?)`},
		{&s.ins[dictSession], `INSERT INTO sessions(session_id) VALUES(?) ON CONFLICT DO NOTHING`},
		{&s.get[dictSession], `SELECT sid FROM sessions WHERE session_id = ?`},
		{&s.ins[dictPath], `INSERT INTO paths(path) VALUES(?) ON CONFLICT DO NOTHING`},
		{&s.get[dictPath], `SELECT id FROM paths WHERE path = ?`},
		{&s.ins[dictDomain], `INSERT INTO domains(rdomain) VALUES(?) ON CONFLICT DO NOTHING`},
		{&s.get[dictDomain], `SELECT id FROM domains WHERE rdomain = ?`},
		{&s.ins[dictPackage], `INSERT INTO packages(ecosystem, name, version) VALUES(?, ?, ?) ON CONFLICT DO NOTHING`},
		{&s.get[dictPackage], `SELECT id FROM packages WHERE ecosystem = ? AND name = ? AND version = ?`},
		{&s.roll[dictPath], `INSERT OR IGNORE INTO path_sessions(path_id, sid) VALUES(?, ?)`},
		{&s.roll[dictDomain], `INSERT OR IGNORE INTO domain_sessions(domain_id, sid) VALUES(?, ?)`},
		{&s.roll[dictPackage], `INSERT OR IGNORE INTO pkg_sessions(pkg_id, sid) VALUES(?, ?)`},
		{&s.sessUpd, `UPDATE sessions SET
			first_ts = CASE WHEN first_ts IS NULL OR ?1 < first_ts THEN ?1 ELSE first_ts END,
			last_ts = CASE WHEN last_ts IS NULL OR ?2 > last_ts THEN ?2 ELSE last_ts END,
			events = events + ?3, procs = procs + ?4, files = files + ?5, nets = nets + ?6,
			pkgs = pkgs + ?7, alerts = alerts + ?8, lost = lost + ?14,
			end_reason = CASE WHEN ?9 AND (end_ts IS NULL OR ?10 >= end_ts) THEN ?11 ELSE end_reason END,
			exit_status = CASE WHEN ?9 AND (end_ts IS NULL OR ?10 >= end_ts) THEN ?12 ELSE exit_status END,
			end_ts = CASE WHEN ?9 AND (end_ts IS NULL OR ?10 >= end_ts) THEN ?10 ELSE end_ts END
			WHERE sid = ?13`},
	} {
		st, err := tx.PrepareContext(ctx, p.q)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("preparing statements: %w", err)
		}
		*p.dst = st
	}
	return &s, nil
}

func (s *stmts) close() {
	all := []*sql.Stmt{s.ev, s.file, s.net, s.pkg, s.skip, s.sessUpd}
	all = append(append(append(all, s.ins[:]...), s.get[:]...), s.roll[:]...)
	for _, st := range all {
		if st != nil {
			st.Close()
		}
	}
}

// idOf returns the id of a key in dictionary d, adding the key when new.
// A key of several columns is given as several values and cached joined
// by NUL, which none of them contains.
func (ix *Index) idOf(ctx context.Context, st *stmts, d int, key ...any) (int64, error) {
	var k string
	if len(key) == 1 {
		k = key[0].(string)
	} else {
		parts := make([]string, len(key))
		for i, v := range key {
			parts[i] = v.(string)
		}
		k = strings.Join(parts, "\x00")
	}
	if id, ok := ix.dicts[d].get(k); ok {
		return id, nil
	}
	if _, err := st.ins[d].ExecContext(ctx, key...); err != nil {
		return 0, fmt.Errorf("adding key: %w", err)
	}
	var id int64
	if err := st.get[d].QueryRowContext(ctx, key...).Scan(&id); err != nil {
		return 0, fmt.Errorf("reading key: %w", err)
	}
	ix.dicts[d].put(k, id)
	return id, nil
}

func (ix *Index) add(ctx context.Context, tx *sql.Tx, batch []Entry) error {
	st, err := prepare(ctx, tx)
	if err != nil {
		return err
	}
	defer st.close()
	aggs := map[int64]*sessionAgg{}
	rolls := map[rollKey]bool{}
	var maxNext uint64
	for _, en := range batch {
		if en.Seq+1 > maxNext {
			maxNext = en.Seq + 1
		}
		var ev event.Event
		if err := decode(en.Raw, &ev); err != nil {
			if _, err := st.skip.ExecContext(ctx, int64(en.Seq), err.Error(), int64(en.Seq)); err != nil {
				return fmt.Errorf("recording skipped entry %d: %w", en.Seq, err)
			}
			ix.log.Warn("skipping undecodable journal entry", "seq", en.Seq, "error", err)
			continue
		}
		sid, err := ix.idOf(ctx, st, dictSession, ev.SessionID)
		if err != nil {
			return fmt.Errorf("indexing session of %d: %w", en.Seq, err)
		}
		ts := ev.TS.UnixNano()
		var pid, exe any
		if ev.Proc != nil {
			if ev.Proc.Pid != 0 {
				pid = int64(ev.Proc.Pid)
			}
			if ev.Proc.Exe != "" {
				exe = ev.Proc.Exe
			}
		}
		res, err := st.ev.ExecContext(ctx, int64(en.Seq), ts, sid, ev.Kind, string(ev.Source), pid, exe, string(en.Raw))
		if err != nil {
			return fmt.Errorf("inserting event %d: %w", en.Seq, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			continue // already indexed
		}
		if err := ix.insertSide(ctx, st, rolls, int64(en.Seq), sid, ts, &ev); err != nil {
			return fmt.Errorf("inserting event %d: %w", en.Seq, err)
		}
		a := aggs[sid]
		if a == nil {
			a = &sessionAgg{first: ts, last: ts}
			aggs[sid] = a
		}
		a.add(&ev, ts)
	}
	for k := range rolls {
		if _, err := st.roll[k.dict].ExecContext(ctx, k.id, k.sid); err != nil {
			return fmt.Errorf("updating rollup: %w", err)
		}
	}
	for sid, a := range aggs {
		var exit any
		if a.exitStatus != nil {
			exit = int64(*a.exitStatus)
		}
		var reason any
		if a.endReason != "" {
			reason = a.endReason
		}
		if _, err := st.sessUpd.ExecContext(ctx, a.first, a.last, a.events, a.procs, a.files, a.nets, a.pkgs, a.alerts,
			a.ended, a.endTS, reason, exit, sid, a.lost); err != nil {
			return fmt.Errorf("updating session summary: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES('next', ?)
		ON CONFLICT(key) DO UPDATE SET value = max(value, excluded.value)`, int64(maxNext)); err != nil {
		return fmt.Errorf("moving cursor: %w", err)
	}
	return nil
}

// decode reads an event leniently (unknown fields from a newer schema are
// ignored) but requires what the index needs: a kind and a time.
func decode(raw []byte, ev *event.Event) error {
	if err := json.Unmarshal(raw, ev); err != nil {
		return fmt.Errorf("decoding event: %w", err)
	}
	if ev.Kind == "" {
		return errors.New("decoding event: no kind")
	}
	if ev.TS.IsZero() {
		return errors.New("decoding event: no ts")
	}
	return nil
}

func (a *sessionAgg) add(ev *event.Event, ts int64) {
	a.first, a.last = min(a.first, ts), max(a.last, ts)
	a.events++
	switch ev.Category() {
	case "process":
		a.procs++
	case "file":
		a.files++
	case "net":
		a.nets++
	case "pkg":
		a.pkgs++
	case "alert":
		a.alerts++
	}
	if ev.Loss != nil {
		a.lost += int64(ev.Loss.Count)
	}
	if ev.Session != nil && (ev.Kind == event.KindSessionTerminate || ev.Session.Op == "terminate") {
		if !a.ended || ts >= a.endTS {
			a.ended, a.endTS, a.endReason, a.exitStatus = true, ts, ev.Session.Reason, ev.Session.ExitStatus
		}
	}
}

// rollKey is one (key, session) pair of a rollup, gathered per batch.
type rollKey struct {
	dict    int
	id, sid int64
}

func (ix *Index) insertSide(ctx context.Context, st *stmts, rolls map[rollKey]bool, seq, sid, ts int64, ev *event.Event) error {
	if f := ev.File; f != nil {
		for i, p := range []string{f.Path, f.NewPath} {
			if p == "" || i == 1 && p == f.Path {
				continue
			}
			id, err := ix.idOf(ctx, st, dictPath, p)
			if err != nil {
				return err
			}
			if _, err := st.file.ExecContext(ctx, seq, sid, ts, id); err != nil {
				return err
			}
			rolls[rollKey{dictPath, id, sid}] = true
		}
	}
	if n := ev.Net; n != nil {
		var names []string
		if d := query.NormalizeDomain(n.Domain); d != "" {
			names = append(names, d)
		}
		if n.DNS != nil {
			if d := query.NormalizeDomain(n.DNS.Query); d != "" && (len(names) == 0 || names[0] != d) {
				names = append(names, d)
			}
		}
		var ip, port any
		if n.DstIP != "" {
			ip = n.DstIP
		}
		if n.DstPort != 0 {
			port = int64(n.DstPort)
		}
		if len(names) == 0 {
			if _, err := st.net.ExecContext(ctx, seq, sid, ts, nil, ip, port); err != nil {
				return err
			}
		}
		for _, d := range names {
			id, err := ix.idOf(ctx, st, dictDomain, query.ReverseDomain(d))
			if err != nil {
				return err
			}
			if _, err := st.net.ExecContext(ctx, seq, sid, ts, id, ip, port); err != nil {
				return err
			}
			rolls[rollKey{dictDomain, id, sid}] = true
		}
	}
	if p := ev.Pkg; p != nil {
		eco, name, version := strings.ToLower(p.Ecosystem), p.Name, p.Resolved
		if (eco == "" || name == "") && p.Purl != "" {
			if m, err := query.ParsePackage(p.Purl); err == nil {
				eco, name = m.Ecosystem, m.Name
				if version == "" {
					version = m.Version
				}
			}
		}
		if eco != "" && name != "" {
			var purl any
			if p.Purl != "" {
				purl = p.Purl
			}
			id, err := ix.idOf(ctx, st, dictPackage, eco, resolver.NormalizeName(eco, name), version)
			if err != nil {
				return err
			}
			if _, err := st.pkg.ExecContext(ctx, seq, sid, ts, id, purl); err != nil {
				return err
			}
			rolls[rollKey{dictPackage, id, sid}] = true
		}
	}
	return nil
}

// Skipped returns the journal entries the index could not decode, by seq,
// with the reason.
func (ix *Index) Skipped(ctx context.Context) (map[uint64]string, error) {
	rows, err := ix.db.QueryContext(ctx, `SELECT seq, error FROM skipped ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("reading skipped entries: %w", err)
	}
	defer rows.Close()
	out := map[uint64]string{}
	for rows.Next() {
		var seq int64
		var msg string
		if err := rows.Scan(&seq, &msg); err != nil {
			return nil, fmt.Errorf("reading skipped entries: %w", err)
		}
		out[uint64(seq)] = msg
	}
	return out, rows.Err()
}

// waitSource is the part of a live journal that Follow needs.
type waitSource interface {
	// Size is the number of durable entries, the next seq.
	Size() uint64
	// Changed returns a channel closed at the next durable append.
	Changed() <-chan struct{}
}

// CatchUp indexes every journal entry after the cursor and returns how many
// entries it read. It returns an error wrapping ErrNoJournal when
// journalDir does not exist, and ErrStale when the journal no longer holds
// the last indexed entry as it was indexed.
func (ix *Index) CatchUp(ctx context.Context, journalDir string) (uint64, error) {
	return ix.catchUp(ctx, journalDir, 0, nil)
}

func (ix *Index) catchUp(ctx context.Context, journalDir string, total uint64, progress func(done, total uint64)) (uint64, error) {
	if fi, err := os.Stat(journalDir); err != nil || !fi.IsDir() {
		return 0, fmt.Errorf("%w: %s is not a journal directory", ErrNoJournal, journalDir)
	}
	from, err := ix.next(ctx, ix.db)
	if err != nil {
		return 0, err
	}
	// The scan starts one entry early, at the last one indexed, to check
	// that the journal still holds it: an index must not mix two journals.
	var n uint64
	batch := make([]Entry, 0, ix.o.batch)
	var buf []byte
	scanFrom, check := from, from > 0
	var want []byte
	if check {
		scanFrom = from - 1
		var raw string
		err := ix.db.QueryRowContext(ctx, `SELECT raw FROM events WHERE seq = ?`, int64(from-1)).Scan(&raw)
		switch {
		case err == nil:
			want = []byte(raw)
		case !errors.Is(err, sql.ErrNoRows):
			return 0, fmt.Errorf("reading last indexed entry: %w", err)
		}
	}
	flush := func() error {
		if err := ix.Add(ctx, batch); err != nil {
			return err
		}
		n += uint64(len(batch))
		batch, buf = batch[:0], buf[:0]
		if progress != nil {
			progress(from+n, max(total, from+n))
		}
		return nil
	}
	err = ix.o.scan(journalDir, scanFrom, func(seq uint64, raw []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if check {
			check = false
			if seq != from-1 || want != nil && !bytes.Equal(raw, want) {
				return fmt.Errorf("%w: entry %d differs from the indexed one", ErrStale, from-1)
			}
			return nil
		}
		// raw is only valid during the call: copy it into one buffer per
		// batch. When append moves the buffer, earlier entries keep
		// pointing into the old array, which nothing writes to again.
		start := len(buf)
		buf = append(buf, raw...)
		batch = append(batch, Entry{Seq: seq, Raw: buf[start:len(buf):len(buf)]})
		if len(batch) == ix.o.batch {
			return flush()
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("reading journal %s: %w", journalDir, err)
	}
	if check {
		return n, fmt.Errorf("%w: it has no entry %d, which is indexed", ErrStale, from-1)
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// Follow catches up with the journal, then waits for it to change and
// catches up again, until ctx is done. It returns ctx's error, or the first
// error from reading the journal or writing the index.
func (ix *Index) Follow(ctx context.Context, journalDir string, j waitSource) error {
	for {
		ch := j.Changed() // taken before catching up, so no append is missed
		next, err := ix.next(ctx, ix.db)
		if err != nil {
			return err
		}
		if j.Size() > next {
			if _, err := ix.CatchUp(ctx, journalDir); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Rebuild indexes the whole journal from seq 0 into this index, which
// should be new and empty (see Reindex), reporting progress after each
// batch (done entries so far; total is the size of the journal when it is
// known, else equal to done). It then builds any deferred indexes (Finish).
func (ix *Index) Rebuild(ctx context.Context, journalDir string, progress func(done, total uint64)) error {
	if next, err := ix.next(ctx, ix.db); err != nil {
		return err
	} else if next != 0 {
		return fmt.Errorf("rebuilding index: %s is not empty (cursor at %d)", ix.path, next)
	}
	if _, err := ix.catchUp(ctx, journalDir, 0, progress); err != nil {
		return err
	}
	return ix.Finish(ctx)
}

// Reindex rebuilds the index file at path from the journal: it builds a new
// file beside it and renames it over path only when complete, so readers
// see the old index or the new one, never a partial one.
func Reindex(ctx context.Context, path, journalDir string, progress func(done, total uint64), opts ...Option) error {
	if fi, err := os.Stat(journalDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a journal directory", ErrNoJournal, journalDir)
	}
	tmp := fmt.Sprintf("%s.rebuild-%d", path, os.Getpid())
	removeDB(tmp)
	ix, err := Open(tmp, append(opts, WithBulk())...)
	if err != nil {
		return err
	}
	err = ix.Rebuild(ctx, journalDir, progress)
	if err == nil {
		// Leave no write-ahead log beside the new file: it is renamed
		// alone.
		_, err = ix.db.ExecContext(ctx, `PRAGMA journal_mode=DELETE`)
		if err != nil {
			err = fmt.Errorf("finishing rebuilt index: %w", err)
		}
	}
	if cerr := ix.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		removeDB(tmp)
		return err
	}
	// The old file's write-ahead log must not be read with the new file.
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			removeDB(tmp)
			return fmt.Errorf("removing old index log: %w", err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		removeDB(tmp)
		return fmt.Errorf("replacing index: %w", err)
	}
	return nil
}

func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		os.Remove(path + suffix)
	}
}

// Stats describes the index.
type Stats struct {
	// Next is the seq after the cursor (the number of entries handled).
	Next   uint64
	Events uint64
	// Sessions counts the sessions, not the host's own events, which have
	// no session.
	Sessions uint64
	Skipped  uint64
}

// Stats counts what the index holds.
func (ix *Index) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	next, err := ix.next(ctx, ix.db)
	if err != nil {
		return s, err
	}
	s.Next = next
	var ev, se, sk int64
	if err := ix.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM sessions WHERE session_id <> ''), (SELECT count(*) FROM skipped)`).Scan(&ev, &se, &sk); err != nil {
		return s, fmt.Errorf("counting index: %w", err)
	}
	s.Events, s.Sessions, s.Skipped = uint64(ev), uint64(se), uint64(sk)
	return s, nil
}

// maxDict bounds a dictionary cache; past it the cache starts over, so a
// long-running follower holds at most this many keys of each kind.
const maxDict = 1 << 17

// dict caches the ids of one dictionary's keys. Keys added inside a
// transaction are pending until it commits, and forgotten if it does not.
type dict struct {
	ids, pending map[string]int64
}

func newDict() *dict { return &dict{ids: map[string]int64{}, pending: map[string]int64{}} }

func (d *dict) get(k string) (int64, bool) {
	if id, ok := d.ids[k]; ok {
		return id, true
	}
	id, ok := d.pending[k]
	return id, ok
}

func (d *dict) put(k string, id int64) { d.pending[k] = id }

func (d *dict) commit() {
	if len(d.ids)+len(d.pending) > maxDict {
		d.ids = map[string]int64{}
	}
	for k, id := range d.pending {
		d.ids[k] = id
	}
	clear(d.pending)
}

func (d *dict) rollback() { clear(d.pending) }
