package index

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/sandtrail/sandtrail/record/query"
)

// Reader answers the incident questions over a store's tables. The
// SQLite index has them, keyed by seq; so has the central PostgreSQL store
// of many hosts (record/central), where an entry is keyed by its host id
// (hid) and seq and the tables are partitioned by day. The two differ
// only in the few words of SQL a Dialect holds, so the questions are
// compiled once, here, for both.
type Reader struct {
	db *sql.DB
	d  *Dialect
}

// NewReader returns a Reader of the tables in db, which speaks d.
func NewReader(db *sql.DB, d *Dialect) *Reader { return &Reader{db: db, d: d} }

// Dialect is what differs between the stores' SQL.
type Dialect struct {
	// hints forces a named index ("INDEXED BY files_path"), where the
	// planner would otherwise pick a scan of a small or skewed table.
	hints bool
	// hosts is set when an entry is keyed by (hid, seq), not seq alone.
	hosts bool
	// ids reads the ids of a JSON array argument as a set.
	ids string
	// numbered is set when placeholders are $1, $2, … rather than ?.
	numbered bool
	// cross joins in the order written.
	cross string
	// pathKey, when not 0, is the length in characters of the paths'
	// key column, path_key, the part of a path that an index holds.
	pathKey int
}

// The dialects.
var (
	// SQLite is the index file's (modernc.org/sqlite).
	SQLite = &Dialect{hints: true, ids: "(SELECT value FROM json_each(?))", cross: "CROSS JOIN"}
	// Postgres is the central store's (pgx): the planner needs no hints,
	// an entry is keyed by host and seq, and a join on the entry's day as
	// well lets it look in one day's partition.
	Postgres = &Dialect{hosts: true, ids: "(SELECT jsonb_array_elements_text(?::jsonb)::bigint)", numbered: true, cross: "JOIN",
		pathKey: PathKey}
)

// PathKey is how many characters of a path the central store's index of
// paths holds (path_key, left(path, PathKey)): PostgreSQL's btree holds a
// key of at most about 2,700 bytes, and a kernel path may have 4,096.
const PathKey = 600

// pathRange is the condition that a path is in one of rs. Where the
// index holds only a path's key, the condition is on the key, which finds
// the candidates through the index, and on the path, which decides:
// a path p in [lo, hi) has left(p) in [left(lo), left(hi)] (a prefix of
// a string sorts at or before it, and cutting keeps the order).
func (d *Dialect) pathRange(rs []query.Range) (string, []any) {
	w, a := rangeSQL("path", rs)
	if d.pathKey == 0 {
		return w, a
	}
	var parts []string
	var args []any
	for _, r := range rs {
		lo := leftRunes(r.Lo, d.pathKey)
		switch {
		case r.Exact:
			parts = append(parts, "path_key = ?")
			args = append(args, lo)
		case r.Hi == "":
			parts = append(parts, "path_key >= ?")
			args = append(args, lo)
		default:
			parts = append(parts, "(path_key >= ? AND path_key <= ?)")
			args = append(args, lo, leftRunes(r.Hi, d.pathKey))
		}
	}
	return "(" + strings.Join(parts, " OR ") + ") AND " + w, append(args, a...)
}

// leftRunes is PostgreSQL's left(s, n): the first n characters of s.
func leftRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// table is table name with alias, and the index to use where hints are
// wanted.
func (d *Dialect) table(name, alias, index string) string {
	if d.hints && index != "" {
		return name + " " + alias + " INDEXED BY " + index
	}
	return name + " " + alias
}

// join is the condition that rows a and b are of one entry.
func (d *Dialect) join(a, b string) string {
	if d.hosts {
		return a + ".hid = " + b + ".hid AND " + a + ".seq = " + b + ".seq AND " + a + ".day = " + b + ".day"
	}
	return a + ".seq = " + b + ".seq"
}

// key is the columns that name an entry of alias, as a select list.
func (d *Dialect) key(alias string) string {
	if d.hosts {
		return alias + ".hid AS hid, " + alias + ".seq AS seq, " + alias + ".day AS day"
	}
	return alias + ".seq AS seq"
}

// order is the order of time, then entry, of alias.
func (d *Dialect) order(alias string) string {
	if d.hosts {
		return alias + ".ts, " + alias + ".hid, " + alias + ".seq"
	}
	return alias + ".ts, " + alias + ".seq"
}

// host is the select expression of the entry's host id: 0 on SQLite.
func (d *Dialect) host(alias string) string {
	if d.hosts {
		return alias + ".hid"
	}
	return "0"
}

// bind rewrites q's ? placeholders for d. No query of this package has a
// ? inside a string literal.
func (d *Dialect) bind(q string) string {
	if !d.numbered || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] != '?' {
			b.WriteByte(q[i])
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

func (r *Reader) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return r.db.QueryContext(ctx, r.d.bind(q), args...)
}

func (r *Reader) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return r.db.QueryRowContext(ctx, r.d.bind(q), args...)
}
