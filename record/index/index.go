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
// The hunt for known-malicious packages (policies/intel) asks three more
// questions through its own covering indexes (hunt.go): the distinct
// packages, the install and fetch events of some of them, and the net
// events of some domains or addresses.
//
// The retention policy asks which sessions ended before a time, the old
// entries of no session, and the legal holds (folded from the journal's
// retention.hold and retention.release events), and Forget deletes every
// row of what the journal pruned (retention.go). Catching up reads the
// journal's tombstones too (journal.ScanAll), so a pruned entry is neither
// indexed again nor mistaken for a journal that was replaced.
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
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/mod/sumdb/tlog"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
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
// (journal.ScanAll): entry for each entry, whose raw is only valid during
// the call, and pruned for each entry the journal pruned, with the leaf
// hash its tombstone keeps.
type ScanFunc func(dir string, from uint64, entry func(seq uint64, raw []byte) error, pruned func(seq uint64, leaf tlog.Hash) error) error

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

// WithScanner sets how the journal is read (default journal.ScanAll).
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
	// Reader answers the questions over the index's tables.
	Reader
	path string
	log  hclog.Logger
	o    options

	mu     sync.Mutex // serializes writers and guards the dictionaries, closed
	dicts  [4]*dict   // sessions, paths, domains, packages
	closed bool
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
	ix := &Index{Reader: Reader{db: db, d: SQLite}, path: path, log: o.log.Named("index"), o: o}
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
