package central

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sandtrail/sandtrail/record/index"
)

// insertRows inserts the new rows' events, side rows, rollups and session
// summaries, and the skipped ones.
func (s *Store) insertRows(ctx context.Context, tx pgx.Tx, fresh []*row, day int32) ([]Problem, error) {
	problems, err := s.sessionIDs(ctx, tx, fresh)
	if err != nil {
		return nil, err
	}
	paths, domains, pkgs, err := s.keyIDs(ctx, tx, fresh)
	if err != nil {
		return nil, err
	}
	var evs, files, nets, pkgRows, skipped [][]any
	rolls := map[string]map[[2]int64]bool{"path_sessions": {}, "domain_sessions": {}, "pkg_sessions": {}}
	sums := map[int64]*index.Summary{}
	for _, r := range fresh {
		if r.ev == nil {
			skipped = append(skipped, []any{r.hid, r.seq, r.err})
			continue
		}
		ts := r.ev.TS.UnixNano()
		var pid, exe any
		if p := r.ev.Proc; p != nil {
			if p.Pid != 0 {
				pid = int32(p.Pid)
			}
			if p.Exe != "" {
				exe = text(p.Exe)
			}
		}
		evs = append(evs, []any{r.hid, r.seq, day, ts, r.sid, text(r.ev.Kind), text(string(r.ev.Source)), pid, exe, string(r.raw)})
		k := r.keys
		for _, p := range k.Paths {
			id := paths[pathText(p)]
			files = append(files, []any{r.hid, r.seq, day, r.sid, ts, id})
			rolls["path_sessions"][[2]int64{id, r.sid}] = true
		}
		if k.Net {
			var ip, port any
			if k.IP != "" {
				ip = text(k.IP)
			}
			if k.Port != 0 {
				port = int32(k.Port)
			}
			if len(k.Domains) == 0 {
				nets = append(nets, []any{r.hid, r.seq, day, r.sid, ts, nil, ip, port})
			}
			for _, d := range k.Domains {
				id := domains[text(d)]
				nets = append(nets, []any{r.hid, r.seq, day, r.sid, ts, id, ip, port})
				rolls["domain_sessions"][[2]int64{id, r.sid}] = true
			}
		}
		if p := k.Package; p != nil {
			id := pkgs[packageKeyOf(p)]
			var purl any
			if k.Purl != "" {
				purl = text(k.Purl)
			}
			pkgRows = append(pkgRows, []any{r.hid, r.seq, day, r.sid, ts, id, purl})
			rolls["pkg_sessions"][[2]int64{id, r.sid}] = true
		}
		sum := sums[r.sid]
		if sum == nil {
			sum = &index.Summary{}
			sums[r.sid] = sum
		}
		sum.Add(r.ev, ts)
	}
	if err := copyRows(ctx, tx, evs, files, nets, pkgRows, skipped); err != nil {
		return nil, err
	}
	if err := insertRollups(ctx, tx, rolls); err != nil {
		return nil, err
	}
	return problems, updateSummaries(ctx, tx, sums)
}

// copyRows copies the rows of the events, the side tables and skipped.
func copyRows(ctx context.Context, tx pgx.Tx, evs, files, nets, pkgs, skipped [][]any) error {
	for _, c := range []struct {
		table string
		cols  []string
		rows  [][]any
	}{
		{"events", []string{"hid", "seq", "day", "ts", "sid", "kind", "source", "pid", "exe", "raw"}, evs},
		{"files", []string{"hid", "seq", "day", "sid", "ts", "path_id"}, files},
		{"nets", []string{"hid", "seq", "day", "sid", "ts", "domain_id", "dst_ip", "dst_port"}, nets},
		{"pkgs", []string{"hid", "seq", "day", "sid", "ts", "pkg_id", "purl"}, pkgs},
		{"skipped", []string{"hid", "seq", "error"}, skipped},
	} {
		if len(c.rows) == 0 {
			continue
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{c.table}, c.cols, pgx.CopyFromRows(c.rows)); err != nil {
			return fmt.Errorf("copying %s: %w", c.table, err)
		}
	}
	return nil
}

// insertRollups adds the (key, sid) pairs, in order, so that two
// aggregators adding the same pairs wait for each other rather than
// deadlock.
func insertRollups(ctx context.Context, tx pgx.Tx, rolls map[string]map[[2]int64]bool) error {
	cols := map[string]string{"path_sessions": "path_id", "domain_sessions": "domain_id", "pkg_sessions": "pkg_id"}
	for _, table := range []string{"path_sessions", "domain_sessions", "pkg_sessions"} {
		pairs := rolls[table]
		if len(pairs) == 0 {
			continue
		}
		ids, sids := make([]int64, 0, len(pairs)), make([]int64, 0, len(pairs))
		for p := range pairs {
			ids, sids = append(ids, p[0]), append(sids, p[1])
		}
		q := `INSERT INTO ` + table + `(` + cols[table] + `, sid) SELECT k, s FROM unnest($1::bigint[], $2::bigint[]) AS u(k, s)
			ORDER BY k, s ON CONFLICT DO NOTHING`
		if _, err := tx.Exec(ctx, q, ids, sids); err != nil {
			return fmt.Errorf("updating %s: %w", table, err)
		}
	}
	return nil
}

// updateSummaries adds each session's batch summary to its row, in sid
// order (no deadlock between aggregators).
func updateSummaries(ctx context.Context, tx pgx.Tx, sums map[int64]*index.Summary) error {
	sids := make([]int64, 0, len(sums))
	for sid := range sums {
		sids = append(sids, sid)
	}
	sort.Slice(sids, func(i, j int) bool { return sids[i] < sids[j] })
	b := &pgx.Batch{}
	for _, sid := range sids {
		a := sums[sid]
		var exit, reason any
		if a.ExitStatus != nil {
			exit = *a.ExitStatus
		}
		if a.EndReason != "" {
			reason = text(a.EndReason)
		}
		b.Queue(`UPDATE sessions SET
			first_ts = LEAST(first_ts, $1), last_ts = GREATEST(last_ts, $2),
			events = events + $3, procs = procs + $4, files = files + $5, nets = nets + $6,
			pkgs = pkgs + $7, alerts = alerts + $8, lost = LEAST(lost::numeric + $9, 9223372036854775807)::bigint,
			end_reason = CASE WHEN $10 AND (end_ts IS NULL OR $11 >= end_ts) THEN $12 ELSE end_reason END,
			exit_status = CASE WHEN $10 AND (end_ts IS NULL OR $11 >= end_ts) THEN $13 ELSE exit_status END,
			end_ts = CASE WHEN $10 AND (end_ts IS NULL OR $11 >= end_ts) THEN $11 ELSE end_ts END
			WHERE sid = $14`,
			a.First, a.Last, a.Events, a.Procs, a.Files, a.Nets, a.Pkgs, a.Alerts, a.Lost, a.Ended, a.EndTS, reason, exit, sid)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("updating session summaries: %w", err)
	}
	return nil
}

// sessionIDs sets each row's sid, adding the sessions that are new, and
// gives each new session to the host of its first row. A row of another
// host than its session's (the store's own alerts apart) is made a
// skipped one, and a session_conflict problem: no host writes into
// another's session. An undecodable row has no session.
func (s *Store) sessionIDs(ctx context.Context, tx pgx.Tx, fresh []*row) ([]Problem, error) {
	want := map[string]bool{}
	for _, r := range fresh {
		if r.ev != nil {
			want[text(r.ev.SessionID)] = true
		}
	}
	ids, err := s.ids(ctx, tx, s.dicts.sessions, "sessions", "sid", []string{"session_id"}, want)
	if err != nil {
		return nil, err
	}
	owners, err := s.sessionOwners(ctx, tx, fresh, ids)
	if err != nil {
		return nil, err
	}
	var problems []Problem
	for _, r := range fresh {
		if r.ev == nil {
			continue
		}
		r.sid = ids[text(r.ev.SessionID)]
		if o, ok := owners[r.sid]; ok && o != r.hid && r.hid != 0 {
			problems = append(problems, Problem{Host: s.hostName(r.hid), Seq: uint64(r.seq), Kind: ProblemSessionConflict, Key: r.sid,
				Detail: fmt.Sprintf("host %s entry %d names session %q, which is host %s's: not indexed, nor the host's other entries that name it (raised once)", s.hostName(r.hid), r.seq, r.ev.SessionID, s.hostName(o))})
			r.ev, r.err = nil, fmt.Sprintf("session %s is host %s's", text(r.ev.SessionID), s.hostName(o))
		}
	}
	return problems, nil
}

// sessionOwners returns the owning host of the rows' sessions (the empty
// session, the hosts' own events, has none), giving each new one to the
// first host of the rows (in hid, seq order) that names it.
func (s *Store) sessionOwners(ctx context.Context, tx pgx.Tx, fresh []*row, ids map[string]int64) (map[int64]int32, error) {
	owners := map[int64]int32{}
	var claimSid []int64
	var claimHid []int32
	s.mu.Lock()
	for _, r := range fresh {
		if r.ev == nil || r.ev.SessionID == "" || r.hid == 0 {
			continue
		}
		sid := ids[text(r.ev.SessionID)]
		if _, seen := owners[sid]; seen {
			continue
		}
		if o, ok := s.dicts.owners[sid]; ok {
			owners[sid] = o
			continue
		}
		owners[sid] = r.hid
		claimSid, claimHid = append(claimSid, sid), append(claimHid, r.hid)
	}
	s.mu.Unlock()
	if len(claimSid) == 0 {
		return owners, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE sessions t SET hid = u.h FROM unnest($1::bigint[], $2::integer[]) AS u(sid, h)
		WHERE t.sid = u.sid AND t.hid IS NULL`, claimSid, claimHid); err != nil {
		return nil, fmt.Errorf("claiming sessions: %w", err)
	}
	q, err := tx.Query(ctx, `SELECT sid, hid FROM sessions WHERE sid = ANY($1)`, claimSid)
	if err != nil {
		return nil, fmt.Errorf("reading sessions' hosts: %w", err)
	}
	var sid int64
	var hid int32
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err = pgx.ForEachRow(q, []any{&sid, &hid}, func() error {
		owners[sid] = hid
		if len(s.dicts.owners) > maxDict {
			clear(s.dicts.owners)
		}
		s.dicts.owners[sid] = hid
		return nil
	})
	return owners, err
}

// keyIDs returns the ids of the rows' paths, domains and packages, adding
// those that are new.
func (s *Store) keyIDs(ctx context.Context, tx pgx.Tx, fresh []*row) (paths, domains, pkgs map[string]int64, err error) {
	wp, wd, wk := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range fresh {
		for _, p := range r.keys.Paths {
			wp[pathText(p)] = true
		}
		for _, d := range r.keys.Domains {
			wd[text(d)] = true
		}
		if p := r.keys.Package; p != nil {
			wk[packageKeyOf(p)] = true
		}
	}
	if paths, err = s.pathIDs(ctx, tx, wp); err != nil {
		return
	}
	if domains, err = s.ids(ctx, tx, s.dicts.domains, "domains", "id", []string{"rdomain"}, wd); err != nil {
		return
	}
	pkgs, err = s.ids(ctx, tx, s.dicts.packages, "packages", "id", []string{"ecosystem", "name", "version"}, wk)
	return
}

// ids returns the ids of the keys want in dictionary table (id column
// idCol, key columns cols; a key of several columns is its values joined
// by NUL), from cache or the table, adding the keys that are new in key
// order.
func (s *Store) ids(ctx context.Context, tx pgx.Tx, cache map[string]int64, table, idCol string, cols []string, want map[string]bool) (map[string]int64, error) {
	out := make(map[string]int64, len(want))
	var missing []string
	s.mu.Lock()
	for k := range want {
		if id, ok := cache[k]; ok {
			out[k] = id
		} else {
			missing = append(missing, k)
		}
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	sort.Strings(missing)
	arrays := make([]any, len(cols))
	for c := range cols {
		vals := make([]string, len(missing))
		for i, k := range missing {
			vals[i] = strings.Split(k, "\x00")[c]
		}
		arrays[c] = vals
	}
	var un, names, casts []string
	for i, c := range cols {
		un = append(un, fmt.Sprintf("$%d::text[]", i+1))
		names = append(names, "u"+c)
		casts = append(casts, "t."+c+" = u.u"+c)
	}
	u := "unnest(" + strings.Join(un, ", ") + ") AS u(" + strings.Join(names, ", ") + ")"
	if _, err := tx.Exec(ctx, "INSERT INTO "+table+"("+strings.Join(cols, ", ")+") SELECT "+strings.Join(names, ", ")+
		" FROM "+u+" ORDER BY "+strings.Join(names, ", ")+" ON CONFLICT DO NOTHING", arrays...); err != nil {
		return nil, fmt.Errorf("adding to %s: %w", table, err)
	}
	q, err := tx.Query(ctx, "SELECT t."+idCol+", "+prefixed("t.", cols)+" FROM "+table+" t JOIN "+u+" ON "+strings.Join(casts, " AND "), arrays...)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", table, err)
	}
	added := map[string]int64{}
	vals := make([]string, len(cols))
	dst := []any{new(int64)}
	for i := range vals {
		dst = append(dst, &vals[i])
	}
	if _, err := pgx.ForEachRow(q, dst, func() error {
		added[strings.Join(vals, "\x00")] = *dst[0].(*int64)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reading %s: %w", table, err)
	}
	for k, id := range added {
		out[k] = id
	}
	s.mu.Lock()
	keep(cache, added)
	s.mu.Unlock()
	return out, nil
}

func prefixed(p string, cols []string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = p + c
	}
	return strings.Join(out, ", ")
}

// pathIDs returns the ids of the paths want, from cache or the table,
// adding those that are new. The table is found by path_key, whose index
// holds a long path's beginning only, and the whole path decides.
func (s *Store) pathIDs(ctx context.Context, tx pgx.Tx, want map[string]bool) (map[string]int64, error) {
	out := make(map[string]int64, len(want))
	var missing []string
	s.mu.Lock()
	for p := range want {
		if id, ok := s.dicts.paths[p]; ok {
			out[p] = id
		} else {
			missing = append(missing, p)
		}
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	sort.Strings(missing)
	added := map[string]int64{}
	collect := func(q pgx.Rows) error {
		var id int64
		var p string
		_, err := pgx.ForEachRow(q, []any{&id, &p}, func() error { added[p] = id; return nil })
		return err
	}
	q, err := tx.Query(ctx, `SELECT t.id, t.path FROM paths t JOIN unnest($1::text[]) AS u(p) ON t.path_key = left(u.p, $2) AND t.path = u.p`, missing, index.PathKey)
	if err == nil {
		err = collect(q)
	}
	if err != nil {
		return nil, fmt.Errorf("reading paths: %w", err)
	}
	var fresh []string
	for _, p := range missing {
		if _, ok := added[p]; !ok {
			fresh = append(fresh, p)
		}
	}
	if len(fresh) > 0 {
		q, err := tx.Query(ctx, `INSERT INTO paths(path) SELECT unnest($1::text[]) RETURNING id, path`, fresh)
		if err == nil {
			err = collect(q)
		}
		if err != nil {
			return nil, fmt.Errorf("adding paths: %w", err)
		}
	}
	for p, id := range added {
		out[p] = id
	}
	s.mu.Lock()
	keep(s.dicts.paths, added)
	s.mu.Unlock()
	return out, nil
}
