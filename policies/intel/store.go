package intel

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/sandtrail/sandtrail/resolver"
)

// schemaVersion is the store's schema, in SQLite's user_version.
const schemaVersion = 1

// ErrSchema means the store file was written by another schema version;
// remove it and import again.
var ErrSchema = errors.New("intel: store schema version mismatch")

var storeTables = []string{
	`CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID`,
	// records holds each kept record as Record's JSON.
	`CREATE TABLE IF NOT EXISTS records(id TEXT PRIMARY KEY, modified INTEGER NOT NULL, raw TEXT NOT NULL) WITHOUT ROWID`,
	// packages: each record's affected packages by ecosystem and
	// normalized name, with the Affected's JSON (which versions).
	`CREATE TABLE IF NOT EXISTS packages(ecosystem TEXT NOT NULL, name TEXT NOT NULL, id TEXT NOT NULL, n INTEGER NOT NULL,
		affected TEXT NOT NULL, PRIMARY KEY(ecosystem, name, id, n)) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS packages_id ON packages(id)`,
	// iocs: each record's indicators.
	`CREATE TABLE IF NOT EXISTS iocs(kind TEXT NOT NULL, value TEXT NOT NULL, id TEXT NOT NULL,
		PRIMARY KEY(kind, value, id)) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS iocs_id ON iocs(id)`,
}

// Store is the store of known-malicious package records: a SQLite file
// (<data_dir>/intel.db for the daemon, created 0600), and an in-memory
// snapshot of it that Lookup, LookupHash and IOCs answer from. The
// snapshot is reloaded when another process (an import) changed the file,
// checked at most once per refresh interval. A Store is safe for
// concurrent use.
type Store struct {
	db      *sql.DB
	path    string
	every   time.Duration
	snap    atomic.Pointer[snapshot]
	mu      sync.Mutex // serializes writers and reloads
	checked atomic.Int64
}

// Option configures Open.
type Option func(*Store)

// WithRefresh sets how often the store checks whether the file changed
// (default one second; 0 checks on every lookup).
func WithRefresh(d time.Duration) Option { return func(s *Store) { s.every = d } }

// Open opens or creates the store at path.
func Open(path string, opts ...Option) (*Store, error) {
	if f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600); err == nil {
		f.Close()
	} else {
		return nil, fmt.Errorf("opening intel store %s: %w", path, err)
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	db, err := sql.Open("sqlite", "file:"+esc+"?_txlock=immediate&_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("opening intel store %s: %w", path, err)
	}
	s := &Store{db: db, path: path, every: time.Second}
	for _, o := range opts {
		o(s)
	}
	if err := s.init(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening intel store %s: %w", path, err)
	}
	if err := s.reload(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening intel store %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) init(ctx context.Context) error {
	var v, n int
	if err := s.db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table'`).Scan(&n); err != nil {
		return fmt.Errorf("reading schema: %w", err)
	}
	if n > 0 && v != schemaVersion {
		return fmt.Errorf("%w: file has %d, this build %d", ErrSchema, v, schemaVersion)
	}
	for _, q := range append(storeTables, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion)) {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("creating schema: %w", err)
		}
	}
	return nil
}

// Path returns the store's file name.
func (s *Store) Path() string { return s.path }

// Close closes the store.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("closing intel store: %w", err)
	}
	return nil
}

// generation reads the import counter, which every import moves.
func generation(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int64, error) {
	var g int64
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'generation'`).Scan(&g)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the store's generation: %w", err)
	}
	return g, nil
}

// Refresh reloads the snapshot if the file changed since it was loaded.
func (s *Store) Refresh(ctx context.Context) error {
	s.checked.Store(time.Now().UnixNano())
	g, err := generation(ctx, s.db)
	if err != nil {
		return err
	}
	if cur := s.snap.Load(); cur != nil && cur.generation == g {
		return nil
	}
	return s.reload(ctx)
}

// current returns the snapshot, refreshed first when the refresh interval
// has passed. A failed refresh keeps the snapshot it has.
func (s *Store) current() *snapshot {
	if last := s.checked.Load(); time.Now().UnixNano()-last >= int64(s.every) {
		_ = s.Refresh(context.Background())
	}
	return s.snap.Load()
}

// Lookup returns the records that list name@version of ecosystem (a purl
// type: npm, pypi, cargo, deb), comparing names as the ecosystem does and
// versions with its grammar (see the package doc). An empty version
// matches only the records of every version of the name. The answer comes
// from memory; only the records that match are read from the file (a
// record that cannot be read is returned with its id alone).
func (s *Store) Lookup(ecosystem, name, version string) []Record {
	ids := s.LookupIDs(ecosystem, name, version)
	if len(ids) == 0 {
		return nil
	}
	return s.records(ids)
}

// LookupIDs is Lookup's answer as the records' ids, read from memory only.
func (s *Store) LookupIDs(ecosystem, name, version string) []string {
	sn := s.current()
	entries := sn.packages[ecosystem+"\x00"+resolver.NormalizeName(ecosystem, name)]
	if len(entries) == 0 {
		return nil
	}
	eco, _ := resolver.Lookup(ecosystem)
	var ids []string
	for _, en := range entries {
		if en.match.match(eco, version) && !slices.Contains(ids, en.id) {
			ids = append(ids, en.id)
		}
	}
	return ids
}

// Listed reports whether any record names the package, at any version.
func (s *Store) Listed(ecosystem, name string) bool {
	return len(s.current().packages[ecosystem+"\x00"+resolver.NormalizeName(ecosystem, name)]) > 0
}

// LookupHash returns the records whose IOCs name the sha256 digest, given
// as lower-case hex or as "sha256:<hex>". OSV MAL records rarely carry
// digests.
func (s *Store) LookupHash(hash string) []Record {
	h := strings.ToLower(strings.TrimPrefix(hash, "sha256:"))
	ids := s.current().hashes[h]
	if len(ids) == 0 {
		return nil
	}
	return s.records(ids)
}

// records reads the records with the ids; one that cannot be read is
// given with its id alone.
func (s *Store) records(ids []string) []Record {
	out := make([]Record, 0, len(ids))
	for _, id := range ids {
		r, ok, err := s.Record(context.Background(), id)
		if err != nil || !ok {
			r = Record{ID: id}
		}
		out = append(out, r)
	}
	return out
}

// IOC is one indicator of compromise and the record that names it.
type IOC struct {
	// Kind is domain, url, ip or sha256.
	Kind     string `json:"kind"`
	Value    string `json:"value"`
	Advisory string `json:"advisory"`
}

// The kinds of IOC.
const (
	IOCDomain = "domain"
	IOCURL    = "url"
	IOCIP     = "ip"
	IOCSHA256 = "sha256"
)

// IOCs returns every indicator the records carry, by kind, value and
// record id.
func (s *Store) IOCs() []IOC { return slices.Clone(s.current().iocs) }

// Records returns every record, by id.
func (s *Store) Records(ctx context.Context) ([]Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT raw FROM records ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("reading intel records: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("reading intel records: %w", err)
		}
		r, err := decodeStored(raw)
		if err != nil {
			return nil, fmt.Errorf("reading intel records: %w", err)
		}
		out = append(out, *r)
	}
	return out, rows.Err()
}

// Record returns the record with the id; ok is false when the store does
// not have it.
func (s *Store) Record(ctx context.Context, id string) (r Record, ok bool, err error) {
	var raw []byte
	err = s.db.QueryRowContext(ctx, `SELECT raw FROM records WHERE id = ?`, id).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("reading intel record %s: %w", id, err)
	}
	rec, err := decodeStored(raw)
	if err != nil {
		return Record{}, false, fmt.Errorf("reading intel record %s: %w", id, err)
	}
	return *rec, true, nil
}

// Generation is the import counter of the snapshot the store answers
// from: it moves with every import.
func (s *Store) Generation() int64 { return s.current().generation }

// decodeStored reads a record as the store wrote it.
func decodeStored(raw []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
