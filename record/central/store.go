package central

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sandtrail/sandtrail/record/index"
)

//go:embed migrations/*.sql
var migrations embed.FS

// IsDSN says whether s names a PostgreSQL database (a postgres:// or
// postgresql:// URL), as --store takes one.
func IsDSN(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Store is an open central store.
type Store struct {
	// Reader answers the incident questions, as a host's index does.
	*index.Reader

	pool *pgxpool.Pool
	db   *sql.DB
	log  hclog.Logger

	mu       sync.Mutex
	hosts    map[string]int32 // host → hid, for hosts already in the table
	names    map[int32]string // hid → host, the same
	dicts    dicts
	days     map[int32]bool // the days whose partitions exist
	clock    func() time.Time
	keys     Keys
	gapGrace time.Duration
}

// Option configures Open.
type Option func(*options)

type options struct {
	log      hclog.Logger
	readOnly bool
	clock    func() time.Time
	keys     Keys
	grace    time.Duration
}

// WithLogger sets the logger (default: none).
func WithLogger(l hclog.Logger) Option { return func(o *options) { o.log = l } }

// ReadOnly opens the store for reading: no migration is applied, and a
// database of an older schema is an error. Investigators' roles (SELECT
// only) open it so.
func ReadOnly() Option { return func(o *options) { o.readOnly = true } }

// ErrSchema means the database's schema is not the one this build reads.
var ErrSchema = errors.New("central store: schema version mismatch")

// Open connects to the PostgreSQL database dsn and, unless ReadOnly,
// applies the migrations it lacks.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	o := options{log: hclog.NewNullLogger()}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("central store: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("central store: %w", err)
	}
	s := &Store{pool: pool, log: o.log.Named("central"), hosts: map[string]int32{}, names: map[int32]string{}, dicts: newDicts(), days: map[int32]bool{},
		clock: o.clock, keys: o.keys, gapGrace: o.grace}
	s.db = stdlib.OpenDBFromPool(pool)
	s.Reader = index.NewReader(s.db, index.Postgres)
	if err := s.schema(ctx, o.readOnly); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the store's connections.
func (s *Store) Close() error {
	err := s.db.Close()
	s.pool.Close()
	return err
}

// migration is one file of migrations/: NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, f := range files {
		base := strings.TrimPrefix(f, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: want NNNN_name.sql", base)
		}
		b, err := migrations.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// SchemaVersion is the newest migration's version: the schema this build
// writes and reads.
func SchemaVersion() int {
	ms, err := loadMigrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrateLock is the advisory lock key that serializes migrations.
const migrateLock = 0x53414e44 // "SAND"

// schema applies the migrations the database lacks, each in its own
// transaction, under the advisory lock; read-only, it checks the version.
func (s *Store) schema(ctx context.Context, readOnly bool) error {
	ms, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("central store: %w", err)
	}
	want := ms[len(ms)-1].version
	if readOnly {
		var v int
		err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
		if err != nil {
			return fmt.Errorf("central store: reading schema version (has an aggregator migrated it?): %w", err)
		}
		if v != want {
			return fmt.Errorf("%w: database has %d, this build %d", ErrSchema, v, want)
		}
		return nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("central store: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
		return fmt.Errorf("central store: locking for migrations: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLock) //nolint:errcheck
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations(version integer PRIMARY KEY, name text NOT NULL,
		applied timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("central store: %w", err)
	}
	var have int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("central store: reading schema version: %w", err)
	}
	if have > want {
		return fmt.Errorf("%w: database has %d, newer than this build's %d", ErrSchema, have, want)
	}
	for _, m := range ms {
		if m.version <= have {
			continue
		}
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations(version, name) VALUES($1, $2)`, m.version, m.name)
			return err
		}); err != nil {
			return fmt.Errorf("central store: migration %s: %w", m.name, err)
		}
		s.log.Info("applied migration", "migration", m.name)
	}
	return nil
}
