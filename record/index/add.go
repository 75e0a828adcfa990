package index

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
)

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
	aggs := map[int64]*Summary{}
	rolls := map[rollKey]bool{}
	var maxNext uint64
	for _, en := range batch {
		maxNext = max(maxNext, en.Seq+1)
		if err := ix.addEntry(ctx, st, en, aggs, rolls); err != nil {
			return err
		}
	}
	for k := range rolls {
		if _, err := st.roll[k.dict].ExecContext(ctx, k.id, k.sid); err != nil {
			return fmt.Errorf("updating rollup: %w", err)
		}
	}
	for sid, a := range aggs {
		var exit any
		if a.ExitStatus != nil {
			exit = int64(*a.ExitStatus)
		}
		var reason any
		if a.EndReason != "" {
			reason = a.EndReason
		}
		if _, err := st.sessUpd.ExecContext(ctx, a.First, a.Last, a.Events, a.Procs, a.Files, a.Nets, a.Pkgs, a.Alerts,
			a.Ended, a.EndTS, reason, exit, sid, a.Lost); err != nil {
			return fmt.Errorf("updating session summary: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES('next', ?)
		ON CONFLICT(key) DO UPDATE SET value = max(value, excluded.value)`, int64(maxNext)); err != nil {
		return fmt.Errorf("moving cursor: %w", err)
	}
	return nil
}

// addEntry indexes one entry, or records it as skipped when it does not
// decode, and gathers its session summary and rollup changes.
func (ix *Index) addEntry(ctx context.Context, st *stmts, en Entry, aggs map[int64]*Summary, rolls map[rollKey]bool) error {
	ev, err := event.DecodeStored(en.Raw)
	if err != nil {
		if _, err := st.skip.ExecContext(ctx, int64(en.Seq), err.Error(), int64(en.Seq)); err != nil {
			return fmt.Errorf("recording skipped entry %d: %w", en.Seq, err)
		}
		ix.log.Warn("skipping undecodable journal entry", "seq", en.Seq, "error", err)
		return nil
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
		return nil // already indexed
	}
	if err := ix.insertSide(ctx, st, rolls, int64(en.Seq), sid, ts, ev); err != nil {
		return fmt.Errorf("inserting event %d: %w", en.Seq, err)
	}
	a := aggs[sid]
	if a == nil {
		a = &Summary{}
		aggs[sid] = a
	}
	a.Add(ev, ts)
	return nil
}

// rollKey is one (key, session) pair of a rollup, gathered per batch.
type rollKey struct {
	dict    int
	id, sid int64
}

func (ix *Index) insertSide(ctx context.Context, st *stmts, rolls map[rollKey]bool, seq, sid, ts int64, ev *event.Event) error {
	k := KeysOf(ev)
	for _, p := range k.Paths {
		id, err := ix.idOf(ctx, st, dictPath, p)
		if err != nil {
			return err
		}
		if _, err := st.file.ExecContext(ctx, seq, sid, ts, id); err != nil {
			return err
		}
		rolls[rollKey{dictPath, id, sid}] = true
	}
	if k.Net {
		var ip, port any
		if k.IP != "" {
			ip = k.IP
		}
		if k.Port != 0 {
			port = k.Port
		}
		if len(k.Domains) == 0 {
			if _, err := st.net.ExecContext(ctx, seq, sid, ts, nil, ip, port); err != nil {
				return err
			}
		}
		for _, d := range k.Domains {
			id, err := ix.idOf(ctx, st, dictDomain, d)
			if err != nil {
				return err
			}
			if _, err := st.net.ExecContext(ctx, seq, sid, ts, id, ip, port); err != nil {
				return err
			}
			rolls[rollKey{dictDomain, id, sid}] = true
		}
	}
	if p := k.Package; p != nil {
		var purl any
		if k.Purl != "" {
			purl = k.Purl
		}
		id, err := ix.idOf(ctx, st, dictPackage, p.Ecosystem, p.Name, p.Version)
		if err != nil {
			return err
		}
		if _, err := st.pkg.ExecContext(ctx, seq, sid, ts, id, purl); err != nil {
			return err
		}
		rolls[rollKey{dictPackage, id, sid}] = true
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
