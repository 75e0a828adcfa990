package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/query"
)

// Hit is one event that matched a Filter.
type Hit struct {
	Seq       uint64
	TS        time.Time
	SessionID string
	Kind      string
	Source    string
	// Raw is the event's canonical JSON, as the journal holds it.
	Raw json.RawMessage
}

// Session is the summary of one session.
type Session struct {
	ID          string
	First, Last time.Time
	// Events counts every event; the others count the categories.
	Events, Procs, Files, Nets, Pkgs, Alerts uint64
	// Ended is set once a session.terminate was indexed; End, EndReason
	// and ExitStatus come from the latest one.
	Ended      bool
	End        time.Time
	EndReason  string
	ExitStatus *int32
}

// plan is a compiled filter.
type plan struct {
	q    string
	args []any
	// keep filters candidate rows on the side value (the last column), for
	// what SQL cannot decide: globs and version ranges. nil keeps all.
	keep func(string) bool
	// none is set when the filter cannot match anything (an unknown
	// session).
	none bool
	// side is set when the query reads a side table's value last.
	side bool
}

// side says how a path, domain or package filter reads its side table.
type side struct {
	table, col string
	where      []string
	args       []any
	keep       func(string) bool
}

func rangeSQL(col string, rs []query.Range) (string, []any) {
	var parts []string
	var args []any
	for _, r := range rs {
		switch {
		case r.Exact:
			parts = append(parts, col+" = ?")
			args = append(args, r.Lo)
		case r.Hi == "":
			parts = append(parts, col+" >= ?")
			args = append(args, r.Lo)
		default:
			parts = append(parts, "("+col+" >= ? AND "+col+" < ?)")
			args = append(args, r.Lo, r.Hi)
		}
	}
	return "(" + strings.Join(parts, " OR ") + ")", args
}

func sideOf(f *query.Filter) *side {
	switch {
	case f.Path != nil:
		w, a := rangeSQL("x.path", f.Path.Ranges())
		s := &side{table: "files", col: "x.path", where: []string{w}, args: a}
		if f.Path.Glob {
			s.keep = f.Path.Match
		}
		return s
	case f.Domain != nil:
		w, a := rangeSQL("x.rdomain", []query.Range{f.Domain.Range()})
		return &side{table: "nets", col: "x.rdomain", where: []string{w}, args: a}
	case f.Package != nil:
		p := f.Package
		s := &side{table: "pkgs", col: "x.version", where: []string{"x.ecosystem = ?", "x.name = ?"}, args: []any{p.Ecosystem, p.Name}}
		switch {
		case p.Range != "":
			s.keep = p.MatchVersion
		case p.Version != "":
			s.where = append(s.where, "x.version = ?")
			s.args = append(s.args, p.Version)
		}
		return s
	}
	return nil
}

// kindSQL matches e.kind against the alternatives.
func kindSQL(ks []query.Kind) (string, []any) {
	var parts []string
	var args []any
	for _, k := range ks {
		if k.Prefix {
			hi := []byte(k.Name)
			hi[len(hi)-1]++
			parts = append(parts, "(e.kind >= ? AND e.kind < ?)")
			args = append(args, k.Name, string(hi))
		} else {
			parts = append(parts, "e.kind = ?")
			args = append(args, k.Name)
		}
	}
	return "(" + strings.Join(parts, " OR ") + ")", args
}

// sid resolves a session id; ok is false when the index has no such
// session.
func (ix *Index) sid(ctx context.Context, id string) (int64, bool, error) {
	var sid int64
	err := ix.db.QueryRowContext(ctx, `SELECT sid FROM sessions WHERE session_id = ?`, id).Scan(&sid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("looking up session: %w", err)
	}
	return sid, true, nil
}

// eventPlan compiles f into a query for events, ordered by time.
func (ix *Index) eventPlan(ctx context.Context, f *query.Filter) (*plan, error) {
	var where []string
	var args []any
	add := func(w string, a ...any) { where = append(where, w); args = append(args, a...) }
	sd := sideOf(f)
	p := &plan{}
	if f.Session != "" {
		sid, ok, err := ix.sid(ctx, f.Session)
		if err != nil {
			return nil, err
		}
		if !ok {
			return &plan{none: true}, nil
		}
		add("e.sid = ?", sid)
		if sd != nil {
			add("x.sid = ?", sid)
		}
	}
	if !f.Since.IsZero() {
		add("e.ts >= ?", f.Since.UnixNano())
		if sd != nil {
			add("x.ts >= ?", f.Since.UnixNano())
		}
	}
	if !f.Until.IsZero() {
		add("e.ts < ?", f.Until.UnixNano())
		if sd != nil {
			add("x.ts < ?", f.Until.UnixNano())
		}
	}
	if len(f.Kinds) > 0 {
		w, a := kindSQL(f.Kinds)
		add(w, a...)
	}
	if f.Pid != 0 {
		add("e.pid = ?", int64(f.Pid))
	}
	if f.Reason != "" {
		add("e.sid IN (SELECT sid FROM sessions WHERE end_reason = ?)", f.Reason)
	}
	cols := "e.seq, e.ts, s.session_id, e.kind, e.source, e.raw"
	var from string
	if sd != nil {
		cols += ", " + sd.col
		from = sd.table + " x JOIN events e ON e.seq = x.seq JOIN sessions s ON s.sid = e.sid"
		where = append(sd.where, where...)
		args = append(sd.args, args...)
		p.keep, p.side = sd.keep, true
	} else {
		from = "events e JOIN sessions s ON s.sid = e.sid"
	}
	p.q = "SELECT " + cols + " FROM " + from
	if len(where) > 0 {
		p.q += " WHERE " + strings.Join(where, " AND ")
	}
	p.q += " ORDER BY e.ts, e.seq"
	// A side table can hold two rows for one event (a rename's two paths);
	// those are dropped while reading, so the limit is applied there too.
	if f.Limit > 0 && sd == nil {
		p.q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	p.args = args
	return p, nil
}

// Each calls fn for every event that matches f, in time order (then seq),
// at most f.Limit of them when it is set. An error from fn stops the
// iteration and is returned as is.
func (ix *Index) Each(ctx context.Context, f query.Filter, fn func(Hit) error) error {
	p, err := ix.eventPlan(ctx, &f)
	if err != nil {
		return err
	}
	if p.none {
		return nil
	}
	rows, err := ix.db.QueryContext(ctx, p.q, p.args...)
	if err != nil {
		return fmt.Errorf("querying index: %w", err)
	}
	defer rows.Close()
	var n int
	var last int64 = -1
	for rows.Next() {
		var h Hit
		var seq, ts int64
		var raw []byte
		var val sql.NullString
		dst := []any{&seq, &ts, &h.SessionID, &h.Kind, &h.Source, &raw}
		if p.side {
			dst = append(dst, &val)
		}
		if err := rows.Scan(dst...); err != nil {
			return fmt.Errorf("reading index: %w", err)
		}
		if p.keep != nil && !p.keep(val.String) {
			continue
		}
		if seq == last {
			continue
		}
		last = seq
		h.Seq, h.TS, h.Raw = uint64(seq), time.Unix(0, ts).UTC(), raw
		if err := fn(h); err != nil {
			return err
		}
		n++
		if f.Limit > 0 && n >= f.Limit {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading index: %w", err)
	}
	return nil
}

// Query returns the events that match f, in time order (then seq).
func (ix *Index) Query(ctx context.Context, f query.Filter) ([]Hit, error) {
	var out []Hit
	err := ix.Each(ctx, f, func(h Hit) error {
		out = append(out, h)
		return nil
	})
	return out, err
}

const sessionCols = `s.session_id, s.first_ts, s.last_ts, s.events, s.procs, s.files, s.nets, s.pkgs, s.alerts, s.end_ts, s.end_reason, s.exit_status`

// sessionPlan compiles f into a query for the sessions that have at least
// one event matching f. With a glob or a version range it returns, instead,
// a query for candidate (sid, value) pairs that keep then filters.
func (ix *Index) sessionPlan(ctx context.Context, f *query.Filter) (*plan, error) {
	var where []string
	var args []any
	add := func(w string, a ...any) { where = append(where, w); args = append(args, a...) }
	p := &plan{}
	var sid int64
	if f.Session != "" {
		var ok bool
		var err error
		sid, ok, err = ix.sid(ctx, f.Session)
		if err != nil {
			return nil, err
		}
		if !ok {
			return &plan{none: true}, nil
		}
	}
	// The event conditions, on e (events) or x (a side table).
	var ew []string
	var ea []any
	eadd := func(w string, a ...any) { ew = append(ew, w); ea = append(ea, a...) }
	sd := sideOf(f)
	alias := "e"
	if sd != nil {
		alias = "x"
	}
	if f.Session != "" && sd != nil {
		eadd("x.sid = ?", sid)
	}
	if !f.Since.IsZero() {
		eadd(alias+".ts >= ?", f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		eadd(alias+".ts < ?", f.Until.UnixNano())
	}
	needEvents := len(f.Kinds) > 0 || f.Pid != 0
	if len(f.Kinds) > 0 {
		w, a := kindSQL(f.Kinds)
		eadd(w, a...)
	}
	if f.Pid != 0 {
		eadd("e.pid = ?", int64(f.Pid))
	}
	switch {
	case sd != nil:
		from := sd.table + " x"
		if needEvents {
			from += " JOIN events e ON e.seq = x.seq"
		}
		cond := append(append([]string(nil), sd.where...), ew...)
		cargs := append(append([]any(nil), sd.args...), ea...)
		if f.Reason != "" {
			cond = append(cond, "x.sid IN (SELECT sid FROM sessions WHERE end_reason = ?)")
			cargs = append(cargs, f.Reason)
		}
		if sd.keep != nil {
			p.q = "SELECT DISTINCT x.sid, " + sd.col + " FROM " + from + " WHERE " + strings.Join(cond, " AND ")
			p.args, p.keep = cargs, sd.keep
			return p, nil
		}
		add("s.sid IN (SELECT x.sid FROM "+from+" WHERE "+strings.Join(cond, " AND ")+")", cargs...)
	case len(ew) > 0:
		add("EXISTS (SELECT 1 FROM events e WHERE e.sid = s.sid AND "+strings.Join(ew, " AND ")+")", ea...)
	}
	if f.Session != "" {
		add("s.sid = ?", sid)
	}
	if f.Reason != "" && sd == nil {
		add("s.end_reason = ?", f.Reason)
	}
	p.q = "SELECT " + sessionCols + " FROM sessions s"
	if len(where) > 0 {
		p.q += " WHERE " + strings.Join(where, " AND ")
	}
	p.q += " ORDER BY s.first_ts, s.sid"
	if f.Limit > 0 {
		p.q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	p.args = args
	return p, nil
}

// Sessions returns the sessions that have at least one event matching f
// (every session for the zero Filter), ordered by their first event, at
// most f.Limit of them when it is set.
func (ix *Index) Sessions(ctx context.Context, f query.Filter) ([]Session, error) {
	p, err := ix.sessionPlan(ctx, &f)
	if err != nil {
		return nil, err
	}
	if p.none {
		return nil, nil
	}
	if p.keep == nil {
		return ix.readSessions(ctx, p.q, p.args...)
	}
	rows, err := ix.db.QueryContext(ctx, p.q, p.args...)
	if err != nil {
		return nil, fmt.Errorf("querying index: %w", err)
	}
	sids := map[int64]bool{}
	for rows.Next() {
		var sid int64
		var val sql.NullString
		if err := rows.Scan(&sid, &val); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading index: %w", err)
		}
		if !sids[sid] && p.keep(val.String) {
			sids[sid] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading index: %w", err)
	}
	var out []Session
	for sid := range sids {
		s, err := ix.readSessions(ctx, "SELECT "+sessionCols+" FROM sessions s WHERE s.sid = ?", sid)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	slices.SortFunc(out, func(a, b Session) int {
		if c := a.First.Compare(b.First); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func (ix *Index) readSessions(ctx context.Context, q string, args ...any) ([]Session, error) {
	rows, err := ix.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("querying index: %w", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var s Session
		var first, last, endTS, exit sql.NullInt64
		var reason sql.NullString
		var ev, pr, fi, ne, pk, al int64
		if err := rows.Scan(&s.ID, &first, &last, &ev, &pr, &fi, &ne, &pk, &al, &endTS, &reason, &exit); err != nil {
			return nil, fmt.Errorf("reading sessions: %w", err)
		}
		s.First, s.Last = time.Unix(0, first.Int64).UTC(), time.Unix(0, last.Int64).UTC()
		s.Events, s.Procs, s.Files, s.Nets, s.Pkgs, s.Alerts = uint64(ev), uint64(pr), uint64(fi), uint64(ne), uint64(pk), uint64(al)
		if endTS.Valid {
			s.Ended, s.End, s.EndReason = true, time.Unix(0, endTS.Int64).UTC(), reason.String
			if exit.Valid {
				v := int32(exit.Int64)
				s.ExitStatus = &v
			}
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading sessions: %w", err)
	}
	return out, nil
}
