package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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
	// Lost sums the counts of the session's own loss events (collector.loss
	// with its session_id): events it had that are not in the record.
	Lost uint64
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
	// none is set when the filter cannot match anything (an unknown
	// session, no path matching a glob).
	none bool
}

// side is how a path, domain or package filter reads its side table (as
// x): the keys that match, from the dictionary, then their rows.
type side struct {
	// table names the side table and forces its index: on a small or
	// skewed table the planner may otherwise prefer a scan.
	table string
	// rollup is the (key, sid) table, key the key column, and keys the
	// set of matching keys ("(SELECT id FROM ...)").
	rollup, key, keys string
	args              []any
}

// where is the side condition on alias x.
func (sd *side) where() string { return "x." + sd.key + " IN " + sd.keys }

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

// sideOf compiles the path, domain or package part of f. What SQL cannot
// decide (a glob, a version range) is decided here in Go over the
// dictionary's candidate keys, which are few next to the rows; the side
// rows are then found by key. none is set when no key matches.
func (r *Reader) sideOf(ctx context.Context, f *query.Filter) (sd *side, none bool, err error) {
	switch {
	case f.Path != nil && !f.Path.Glob:
		w, a := r.d.pathRange(f.Path.Ranges())
		return r.filesSide("(SELECT id FROM paths WHERE "+w+")", a), false, nil
	case f.Path != nil:
		w, a := r.d.pathRange(f.Path.Ranges())
		ids, err := r.keys(ctx, "SELECT id, path FROM paths WHERE "+w, a, f.Path.Match)
		if err != nil || len(ids) == 0 {
			return nil, err == nil, err
		}
		return r.filesSide(r.d.ids, []any{ids}), false, nil
	case f.Domain != nil:
		w, a := rangeSQL("rdomain", []query.Range{f.Domain.Range()})
		return &side{table: r.d.table("nets", "x", "nets_domain"), rollup: "domain_sessions", key: "domain_id",
			keys: "(SELECT id FROM domains WHERE " + w + ")", args: a}, false, nil
	case f.Package != nil:
		p := f.Package
		switch {
		case p.Range != "":
			ids, err := r.keys(ctx, "SELECT id, version FROM packages WHERE ecosystem = ? AND name = ?",
				[]any{p.Ecosystem, p.Name}, p.MatchVersion)
			if err != nil || len(ids) == 0 {
				return nil, err == nil, err
			}
			return r.pkgsSide(r.d.ids, []any{ids}), false, nil
		case p.Version != "":
			return r.pkgsSide("(SELECT id FROM packages WHERE ecosystem = ? AND name = ? AND version = ?)",
				[]any{p.Ecosystem, p.Name, p.Version}), false, nil
		default:
			return r.pkgsSide("(SELECT id FROM packages WHERE ecosystem = ? AND name = ?)", []any{p.Ecosystem, p.Name}), false, nil
		}
	}
	return nil, false, nil
}

func (r *Reader) filesSide(keys string, args []any) *side {
	return &side{table: r.d.table("files", "x", "files_path"), rollup: "path_sessions", key: "path_id", keys: keys, args: args}
}

func (r *Reader) pkgsSide(keys string, args []any) *side {
	return &side{table: r.d.table("pkgs", "x", "pkgs_pkg"), rollup: "pkg_sessions", key: "pkg_id", keys: keys, args: args}
}

// keys runs q for (id, value) rows and returns, as a JSON array for
// json_each, the ids whose value keep accepts.
func (r *Reader) keys(ctx context.Context, q string, args []any, keep func(string) bool) (string, error) {
	rows, err := r.query(ctx, q, args...)
	if err != nil {
		return "", fmt.Errorf("querying index: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		var v string
		if err := rows.Scan(&id, &v); err != nil {
			return "", fmt.Errorf("reading index: %w", err)
		}
		if keep(v) {
			ids = append(ids, id)
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("reading index: %w", err)
	}
	if len(ids) == 0 {
		return "", nil
	}
	b, err := json.Marshal(ids)
	return string(b), err
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
func (r *Reader) sid(ctx context.Context, id string) (int64, bool, error) {
	var sid int64
	err := r.queryRow(ctx, `SELECT sid FROM sessions WHERE session_id = ?`, id).Scan(&sid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("looking up session: %w", err)
	}
	return sid, true, nil
}

// conds is a conjunction of SQL conditions and their arguments.
type conds struct {
	where []string
	args  []any
}

func (c *conds) add(w string, a ...any) { c.where, c.args = append(c.where, w), append(c.args, a...) }

// and appends the conditions of d.
func (c *conds) and(d conds) {
	c.where, c.args = append(c.where, d.where...), append(c.args, d.args...)
}

func (c *conds) sql() string { return strings.Join(c.where, " AND ") }

// window adds the filter's time window on the ts column of alias.
func (c *conds) window(alias string, f *query.Filter) {
	if !f.Since.IsZero() {
		c.add(alias+".ts >= ?", f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		c.add(alias+".ts < ?", f.Until.UnixNano())
	}
}

// eventConds are the conditions that only the events table (e) can check:
// the kinds and the pid.
func eventConds(f *query.Filter) conds {
	var c conds
	if len(f.Kinds) > 0 {
		w, a := kindSQL(f.Kinds)
		c.add(w, a...)
	}
	if f.Pid != 0 {
		c.add("e.pid = ?", int64(f.Pid))
	}
	return c
}

// limit appends the filter's limit, if it has one, to query q.
func limit(q string, args []any, f *query.Filter) (string, []any) {
	if f.Limit > 0 {
		return q + " LIMIT ?", append(args, f.Limit)
	}
	return q, args
}

// filterSID resolves the filter's session; ok is false when the filter
// names a session the index does not have.
func (r *Reader) filterSID(ctx context.Context, f *query.Filter) (sid int64, ok bool, err error) {
	if f.Session == "" {
		return 0, true, nil
	}
	return r.sid(ctx, f.Session)
}

// eventPlan compiles f into a query for events, ordered by time.
func (r *Reader) eventPlan(ctx context.Context, f *query.Filter) (*plan, error) {
	sd, none, err := r.sideOf(ctx, f)
	if err != nil || none {
		return &plan{none: none}, err
	}
	sid, ok, err := r.filterSID(ctx, f)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &plan{none: true}, nil
	}
	env := envelopeConds(f, sd, sid)
	if sd == nil {
		return eventsPlan(r.d, f, env), nil
	}
	return sideEventsPlan(r.d, f, sd, env), nil
}

// envelopeConds are the conditions on the event's envelope, under alias
// e (events), or x (the side table sd, which repeats sid and ts) with sd's
// own condition first.
func envelopeConds(f *query.Filter, sd *side, sid int64) conds {
	var c conds
	alias := "e"
	if sd != nil {
		alias = "x"
		c.add(sd.where(), sd.args...)
	}
	if f.Session != "" {
		c.add(alias+".sid = ?", sid)
	}
	c.window(alias, f)
	if f.Reason != "" {
		c.add(alias+".sid IN (SELECT sid FROM sessions WHERE end_reason = ?)", f.Reason)
	}
	return c
}

// eventCols are the columns a Hit is read from, with the entry's host.
func eventCols(d *Dialect) string {
	return "SELECT e.seq, e.ts, s.session_id, e.kind, e.source, e.raw, " + d.host("e") + " FROM "
}

// eventsPlan reads the events table alone, in time order.
func eventsPlan(d *Dialect, f *query.Filter, env conds) *plan {
	env.and(eventConds(f))
	p := &plan{q: eventCols(d) + "events e JOIN sessions s ON s.sid = e.sid"}
	if len(env.where) > 0 {
		p.q += " WHERE " + env.sql()
	}
	p.q, p.args = limit(p.q+" ORDER BY "+d.order("e"), env.args, f)
	return p
}

// sideEventsPlan reads the events through the side table sd: the matching
// (ts, seq) pairs come from its covering index (and, for a kind or a pid,
// the event's row, whose JSON is stored last and not read) and are put in
// order and cut to the limit first, small as they are; the events' JSON is
// read only for those that are kept. DISTINCT folds a rename's two matching
// paths into one event.
func sideEventsPlan(d *Dialect, f *query.Filter, sd *side, env conds) *plan {
	from := sd.table
	if ev := eventConds(f); len(ev.where) > 0 {
		from += " " + d.cross + " events e ON " + d.join("e", "x")
		env.and(ev)
	}
	inner, args := limit("SELECT DISTINCT "+d.key("x")+", x.ts AS ts FROM "+from+" WHERE "+env.sql()+
		" ORDER BY "+d.order("x"), env.args, f)
	return &plan{
		q: eventCols(d) + "(" + inner + ") k " + d.cross + " events e ON " + d.join("e", "k") +
			" JOIN sessions s ON s.sid = e.sid ORDER BY " + d.order("k"),
		args: args,
	}
}

// Each calls fn for every event that matches f, in time order (then seq),
// at most f.Limit of them when it is set. An error from fn stops the
// iteration and is returned as is.
func (r *Reader) Each(ctx context.Context, f query.Filter, fn func(Hit) error) error {
	p, err := r.eventPlan(ctx, &f)
	if err != nil {
		return err
	}
	if p.none {
		return nil
	}
	rows, err := r.query(ctx, p.q, p.args...)
	if err != nil {
		return fmt.Errorf("querying index: %w", err)
	}
	defer rows.Close()
	var n int
	last := [2]int64{-1, -1}
	for rows.Next() {
		var h Hit
		var seq, ts, hid int64
		var raw []byte
		if err := rows.Scan(&seq, &ts, &h.SessionID, &h.Kind, &h.Source, &raw, &hid); err != nil {
			return fmt.Errorf("reading index: %w", err)
		}
		if [2]int64{hid, seq} == last {
			continue
		}
		last = [2]int64{hid, seq}
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
func (r *Reader) Query(ctx context.Context, f query.Filter) ([]Hit, error) {
	var out []Hit
	err := r.Each(ctx, f, func(h Hit) error {
		out = append(out, h)
		return nil
	})
	return out, err
}

const sessionCols = `s.session_id, s.first_ts, s.last_ts, s.events, s.procs, s.files, s.nets, s.pkgs, s.alerts, s.lost, s.end_ts, s.end_reason, s.exit_status`

// sessionPlan compiles f into a query for the sessions that have at least
// one event matching f. The host's own events (collector.capabilities,
// journal.recovered, a host-wide collector.loss) have no session: the
// sessions table keeps them under the empty session id, which is never
// listed.
func (r *Reader) sessionPlan(ctx context.Context, f *query.Filter) (*plan, error) {
	sid, ok, err := r.filterSID(ctx, f)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &plan{none: true}, nil
	}
	sd, none, err := r.sideOf(ctx, f)
	if err != nil || none {
		return &plan{none: none}, err
	}
	var c conds
	c.add("s.session_id <> ''")
	if w, a := sessionMatch(r.d, f, sd, sid); w != "" {
		c.add(w, a...)
	}
	if f.Session != "" {
		c.add("s.sid = ?", sid)
	}
	if f.Reason != "" {
		c.add("s.end_reason = ?", f.Reason)
	}
	p := &plan{q: "SELECT " + sessionCols + " FROM sessions s WHERE " + c.sql()}
	p.q, p.args = limit(p.q+" ORDER BY s.first_ts, s.sid", c.args, f)
	return p, nil
}

// sessionMatch is the condition on s, the sessions table, that it has an
// event matching f's event conditions (on e, events, or x, the side table
// sd), or "" when f has none.
func sessionMatch(d *Dialect, f *query.Filter, sd *side, sid int64) (string, []any) {
	var ev conds
	alias := "e"
	if sd != nil {
		alias = "x"
	}
	if f.Session != "" && sd != nil {
		ev.add("x.sid = ?", sid)
	}
	ev.window(alias, f)
	needEvents := len(f.Kinds) > 0 || f.Pid != 0
	ev.and(eventConds(f))
	switch {
	case sd != nil && len(ev.where) == 0 && !needEvents:
		// Only which sessions have the key: the rollup answers that.
		return "s.sid IN (SELECT r.sid FROM " + sd.rollup + " r WHERE r." + sd.key + " IN " + sd.keys + ")", sd.args
	case sd != nil:
		from := sd.table
		if needEvents {
			from += " JOIN events e ON " + d.join("e", "x")
		}
		cond := append([]string{sd.where()}, ev.where...)
		cargs := append(append([]any(nil), sd.args...), ev.args...)
		return "s.sid IN (SELECT x.sid FROM " + from + " WHERE " + strings.Join(cond, " AND ") + ")", cargs
	case len(f.Kinds) > 0:
		// The kind index holds the session: find the sessions through it.
		return "s.sid IN (SELECT e.sid FROM " + d.table("events", "e", "events_kind") + " WHERE " + ev.sql() + ")", ev.args
	case len(ev.where) > 0:
		// A time window (and a pid): probe each session's events by time.
		return "EXISTS (SELECT 1 FROM events e WHERE e.sid = s.sid AND " + ev.sql() + ")", ev.args
	}
	return "", nil
}

// Sessions returns the sessions that have at least one event matching f
// (every session for the zero Filter), ordered by their first event, at
// most f.Limit of them when it is set. Events without a session (the
// host's own) are in no session's row and make none of their own.
func (r *Reader) Sessions(ctx context.Context, f query.Filter) ([]Session, error) {
	p, err := r.sessionPlan(ctx, &f)
	if err != nil {
		return nil, err
	}
	if p.none {
		return nil, nil
	}
	return r.readSessions(ctx, p.q, p.args...)
}

func (r *Reader) readSessions(ctx context.Context, q string, args ...any) ([]Session, error) {
	rows, err := r.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("querying index: %w", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var s Session
		var first, last, endTS, exit sql.NullInt64
		var reason sql.NullString
		var ev, pr, fi, ne, pk, al, lo int64
		if err := rows.Scan(&s.ID, &first, &last, &ev, &pr, &fi, &ne, &pk, &al, &lo, &endTS, &reason, &exit); err != nil {
			return nil, fmt.Errorf("reading sessions: %w", err)
		}
		s.First, s.Last = time.Unix(0, first.Int64).UTC(), time.Unix(0, last.Int64).UTC()
		s.Events, s.Procs, s.Files, s.Nets, s.Pkgs, s.Alerts = uint64(ev), uint64(pr), uint64(fi), uint64(ne), uint64(pk), uint64(al)
		s.Lost = uint64(lo)
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
