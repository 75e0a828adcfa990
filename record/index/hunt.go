package index

import (
	"context"
	"database/sql"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/query"
)

// The hunt's questions (package policies/intel asks them with a store of
// known-malicious packages): which distinct packages the record names,
// which sessions installed or fetched some of them, and which looked up
// or connected to an indicator's domains and addresses. Each reads a
// dictionary or a side table through its covering index, never the whole
// events table.

// PackageKey is one package of the index's dictionary: its ecosystem, its
// name as the ecosystem compares names (resolver.NormalizeName), and a
// version ("" when the events named none).
type PackageKey struct {
	ID                       int64
	Ecosystem, Name, Version string
}

// EachPackage calls fn with every distinct package that a pkg event of
// the index names, in no particular order. An error from fn stops it and
// is returned as is.
func (ix *Index) EachPackage(ctx context.Context, fn func(PackageKey) error) error {
	rows, err := ix.db.QueryContext(ctx, `SELECT id, ecosystem, name, version FROM packages`)
	if err != nil {
		return fmt.Errorf("reading packages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k PackageKey
		if err := rows.Scan(&k.ID, &k.Ecosystem, &k.Name, &k.Version); err != nil {
			return fmt.Errorf("reading packages: %w", err)
		}
		if err := fn(k); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading packages: %w", err)
	}
	return nil
}

// inChunk bounds the values of one IN list.
const inChunk = 500

// PackageEvents calls fn with each pkg.install and pkg.fetch event of the
// packages ids (PackageKey.ID) at or after since (zero: any time), in seq
// order within each chunk of ids.
func (ix *Index) PackageEvents(ctx context.Context, ids []int64, since time.Time, fn func(Hit) error) error {
	for len(ids) > 0 {
		n := min(len(ids), inChunk)
		args := make([]any, 0, n+3)
		for _, id := range ids[:n] {
			args = append(args, id)
		}
		ids = ids[n:]
		args = append(args, sinceNanos(since), event.KindPkgInstall, event.KindPkgFetch)
		if err := ix.eachHit(ctx, packageEventsQuery(n), args, fn); err != nil {
			return err
		}
	}
	return nil
}

// DomainEvents calls fn with each net event (a lookup, a connect, a send)
// at or after since that names one of domains, or a sub-domain of one.
// Domains are compared as the index keeps them (query.NormalizeDomain).
func (ix *Index) DomainEvents(ctx context.Context, domains []string, since time.Time, fn func(Hit) error) error {
	var ids []int64
	for _, d := range domains {
		d = query.NormalizeDomain(d)
		if d == "" {
			continue
		}
		r := query.ReverseDomain(d)
		// The sub-domains are the reversed names after r+".", before r+"/".
		rows, err := ix.db.QueryContext(ctx, `SELECT id FROM domains WHERE rdomain = ? OR (rdomain > ? AND rdomain < ?)`, r, r+".", r+"/")
		if err != nil {
			return fmt.Errorf("reading domains: %w", err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("reading domains: %w", err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("reading domains: %w", err)
		}
	}
	return ix.netEvents(ctx, "domain_id", toAny(ids), since, fn)
}

// AddressEvents calls fn with each net event at or after since whose
// destination is one of ips (an IPv4 address also as IPv4-mapped IPv6).
// An entry that is not an address is passed over.
func (ix *Index) AddressEvents(ctx context.Context, ips []string, since time.Time, fn func(Hit) error) error {
	var vals []any
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		a = a.Unmap()
		vals = append(vals, a.String())
		if a.Is4() {
			vals = append(vals, netip.AddrFrom16(a.As16()).String())
		}
	}
	return ix.netEvents(ctx, "dst_ip", vals, since, fn)
}

// netEvents calls fn with each event of the nets rows whose col is one of
// vals, once per event.
func (ix *Index) netEvents(ctx context.Context, col string, vals []any, since time.Time, fn func(Hit) error) error {
	for len(vals) > 0 {
		n := min(len(vals), inChunk)
		args := append(append([]any(nil), vals[:n]...), sinceNanos(since))
		vals = vals[n:]
		if err := ix.eachHit(ctx, netEventsQuery(col, n), args, fn); err != nil {
			return err
		}
	}
	return nil
}

// packageEventsQuery reads the install and fetch events of n packages
// through pkgs_pkg; its arguments are the package ids, the time from and
// the two kinds.
func packageEventsQuery(n int) string {
	return `SELECT x.seq, x.ts, s.session_id, e.kind, e.source, e.raw FROM pkgs x
		JOIN events e ON e.seq = x.seq JOIN sessions s ON s.sid = x.sid
		WHERE x.pkg_id IN (` + placeholders(n) + `) AND x.ts >= ? AND e.kind IN (?, ?) ORDER BY x.seq`
}

// netEventsQuery reads the net events of n values of col (domain_id,
// through nets_domain, or dst_ip, through nets_ip) since a time.
func netEventsQuery(col string, n int) string {
	return `SELECT DISTINCT x.seq, x.ts, s.session_id, e.kind, e.source, e.raw FROM nets x
		JOIN events e ON e.seq = x.seq JOIN sessions s ON s.sid = x.sid
		WHERE x.` + col + ` IN (` + placeholders(n) + `) AND x.ts >= ? ORDER BY x.seq`
}

// eachHit runs q, whose columns are a Hit's, and calls fn with each row.
func (ix *Index) eachHit(ctx context.Context, q string, args []any, fn func(Hit) error) error {
	rows, err := ix.db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("querying index: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scanHit(rows, fn); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading index: %w", err)
	}
	return nil
}

func scanHit(rows *sql.Rows, fn func(Hit) error) error {
	var h Hit
	var seq, ts int64
	var raw []byte
	if err := rows.Scan(&seq, &ts, &h.SessionID, &h.Kind, &h.Source, &raw); err != nil {
		return fmt.Errorf("reading index: %w", err)
	}
	h.Seq, h.TS, h.Raw = uint64(seq), time.Unix(0, ts).UTC(), raw
	return fn(h)
}

func sinceNanos(t time.Time) int64 {
	if t.IsZero() {
		return -1 << 63
	}
	return t.UnixNano()
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

func toAny(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
