package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// This file holds what the retention policy asks of the index: which
// sessions ended before a time, which entries of no session are older than
// it, the seqs of a session, the legal holds (folded from the journal's
// retention.hold and retention.release events), and deleting the rows of
// what the journal pruned.

// Ended is a session that ended (session.terminate or session.cleanup) and
// whose last event is before a cutoff.
type Ended struct {
	ID string `json:"id"`
	// Events counts its indexed events; First and Last are their seqs.
	Events uint64    `json:"events"`
	First  uint64    `json:"first_seq"`
	Last   uint64    `json:"last_seq"`
	LastTS time.Time `json:"last_ts"`
	Reason string    `json:"end_reason,omitempty"`
}

// EndedBefore returns the sessions that ended and whose last event is
// before cutoff, oldest first. A session that never ended (no terminate,
// no cleanup) is never among them, however old.
func (ix *Index) EndedBefore(ctx context.Context, cutoff time.Time) ([]Ended, error) {
	rows, err := ix.db.QueryContext(ctx, `SELECT s.session_id, s.events, s.last_ts, coalesce(s.end_reason, ''),
			(SELECT min(seq) FROM events WHERE sid = s.sid), (SELECT max(seq) FROM events WHERE sid = s.sid)
		FROM sessions s
		WHERE s.session_id <> '' AND s.last_ts < ?1
			AND (s.end_ts IS NOT NULL OR EXISTS (SELECT 1 FROM events e WHERE e.kind = ?2 AND e.sid = s.sid))
		ORDER BY s.last_ts, s.session_id`, cutoff.UnixNano(), event.KindSessionCleanup)
	if err != nil {
		return nil, fmt.Errorf("finding ended sessions: %w", err)
	}
	defer rows.Close()
	var out []Ended
	for rows.Next() {
		var e Ended
		var events, last int64
		var first, lastSeq sql.NullInt64
		if err := rows.Scan(&e.ID, &events, &last, &e.Reason, &first, &lastSeq); err != nil {
			return nil, fmt.Errorf("finding ended sessions: %w", err)
		}
		e.Events, e.LastTS = uint64(events), time.Unix(0, last).UTC()
		e.First, e.Last = uint64(first.Int64), uint64(lastSeq.Int64)
		out = append(out, e)
	}
	return out, rows.Err()
}

// SessionSeqs returns the seqs of the indexed events of a session, in
// order.
func (ix *Index) SessionSeqs(ctx context.Context, id string) ([]uint64, error) {
	return ix.seqs(ctx, `SELECT e.seq FROM events e JOIN sessions s ON s.sid = e.sid WHERE s.session_id = ? ORDER BY e.seq`, id)
}

// HasSession reports whether the index holds any event of the session.
func (ix *Index) HasSession(ctx context.Context, id string) (bool, error) {
	var one int
	err := ix.db.QueryRowContext(ctx, `SELECT 1 FROM events e JOIN sessions s ON s.sid = e.sid WHERE s.session_id = ? LIMIT 1`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("finding session %s: %w", id, err)
	}
	return true, nil
}

// SessionlessBefore returns the seqs of the events of no session older
// than cutoff, in order, except the retention policy's own (retention.*),
// which are the record of what it did and of the holds, and the newest
// collector.capabilities before cutoff, which still says what the
// collector could see for the sessions recorded since (NewestKernel).
func (ix *Index) SessionlessBefore(ctx context.Context, cutoff time.Time) ([]uint64, error) {
	return ix.seqs(ctx, `SELECT e.seq FROM events e JOIN sessions s ON s.sid = e.sid
		WHERE s.session_id = '' AND e.ts < ?1 AND e.kind NOT LIKE 'retention.%'
			AND e.seq IS NOT (SELECT max(c.seq) FROM events c WHERE c.kind = ?2 AND c.sid = s.sid AND c.ts < ?1)
		ORDER BY e.seq`, cutoff.UnixNano(), event.KindCapabilities)
}

func (ix *Index) seqs(ctx context.Context, q string, args ...any) ([]uint64, error) {
	rows, err := ix.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading seqs: %w", err)
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("reading seqs: %w", err)
		}
		out = append(out, uint64(s))
	}
	return out, rows.Err()
}

// Hold is a legal hold on a session, as the journal's retention.hold
// events placed it and no later retention.release lifted it.
type Hold struct {
	Session string    `json:"session"`
	Reason  string    `json:"reason"`
	UID     *uint32   `json:"uid,omitempty"`
	Actor   string    `json:"actor,omitempty"`
	Since   time.Time `json:"since"`
	// Seq is the retention.hold event's.
	Seq uint64 `json:"seq"`
}

// Holds returns the legal holds in force, by session, folded in seq order
// from the retention.hold and retention.release events: the set is
// derived from the record, never from a file beside it.
func (ix *Index) Holds(ctx context.Context) ([]Hold, error) {
	rows, err := ix.db.QueryContext(ctx, `SELECT seq, raw FROM events WHERE kind IN (?, ?) ORDER BY seq`,
		event.KindRetentionHold, event.KindRetentionRelease)
	if err != nil {
		return nil, fmt.Errorf("reading legal holds: %w", err)
	}
	defer rows.Close()
	held := map[string]Hold{}
	for rows.Next() {
		var seq int64
		var raw string
		if err := rows.Scan(&seq, &raw); err != nil {
			return nil, fmt.Errorf("reading legal holds: %w", err)
		}
		ev, err := event.DecodeStored([]byte(raw))
		if err != nil || ev.Retention == nil || ev.Retention.Session == "" {
			return nil, fmt.Errorf("reading legal holds: entry %d is not a hold or release of a session", seq)
		}
		if ev.Source != event.SourceJournal {
			continue // only the retention policy's own records place and lift holds
		}
		r := ev.Retention
		if ev.Kind == event.KindRetentionRelease {
			delete(held, r.Session)
			continue
		}
		if _, ok := held[r.Session]; !ok {
			held[r.Session] = Hold{Session: r.Session, Reason: r.Reason, UID: r.UID, Actor: r.Actor, Since: ev.TS, Seq: uint64(seq)}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading legal holds: %w", err)
	}
	out := make([]Hold, 0, len(held))
	for _, h := range held {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Hold) int { return strings.Compare(a.Session, b.Session) })
	return out, nil
}

// Pruned is what the journal pruned, for the index to forget: the seqs of
// every entry pruned, and the sessions they were all of.
type Pruned struct {
	Seqs     []uint64
	Sessions []string
}

// Forget deletes the rows of what the journal pruned, in one transaction:
// the events of p.Seqs with their side-table rows, and then every row left
// of each session in p.Sessions that has no event left (its rollups and
// its summary), so no query returns it again. A session that got an event
// after the prune was planned keeps that event and its summary. The
// summary of the events of no session is brought in line. It returns the
// events deleted. The dictionaries of paths, domains and packages keep
// their keys.
func (ix *Index) Forget(ctx context.Context, p Pruned) (uint64, error) {
	if len(p.Seqs) == 0 {
		return 0, nil
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return 0, ErrClosed
	}
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("forgetting pruned entries: %w", err)
	}
	defer tx.Rollback()
	n, err := forget(ctx, tx, p)
	if err != nil {
		return 0, fmt.Errorf("forgetting pruned entries: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("forgetting pruned entries: committing: %w", err)
	}
	// A forgotten session's id may no longer have a row: a later event of
	// the same id looks it up again.
	for _, id := range p.Sessions {
		ix.dicts[dictSession].forget(id)
	}
	return n, nil
}

// forget runs Forget's deletions in tx, through two temporary tables of
// the doomed seqs and sessions, so that each side table is read once.
func forget(ctx context.Context, tx *sql.Tx, p Pruned) (uint64, error) {
	for _, s := range []string{
		`CREATE TEMP TABLE IF NOT EXISTS doomed_seqs(seq INTEGER PRIMARY KEY)`,
		`CREATE TEMP TABLE IF NOT EXISTS doomed_sids(sid INTEGER PRIMARY KEY)`,
		`DELETE FROM doomed_seqs`, `DELETE FROM doomed_sids`,
	} {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return 0, err
		}
	}
	ins, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO doomed_seqs(seq) VALUES(?)`)
	if err != nil {
		return 0, err
	}
	defer ins.Close()
	for _, seq := range p.Seqs {
		if _, err := ins.ExecContext(ctx, int64(seq)); err != nil {
			return 0, err
		}
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE seq IN (SELECT seq FROM doomed_seqs)`)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	for _, table := range []string{"files", "nets", "pkgs"} {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE seq IN (SELECT seq FROM doomed_seqs)`); err != nil {
			return 0, err
		}
	}
	for _, id := range p.Sessions {
		if id == "" {
			return 0, errors.New("the events of no session are forgotten by seq, not as a session")
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO doomed_sids(sid) SELECT sid FROM sessions s WHERE session_id = ?
			AND NOT EXISTS (SELECT 1 FROM events e WHERE e.sid = s.sid)`, id); err != nil {
			return 0, err
		}
	}
	for _, q := range []string{
		`DELETE FROM path_sessions WHERE sid IN (SELECT sid FROM doomed_sids)`,
		`DELETE FROM domain_sessions WHERE sid IN (SELECT sid FROM doomed_sids)`,
		`DELETE FROM pkg_sessions WHERE sid IN (SELECT sid FROM doomed_sids)`,
		`DELETE FROM sessions WHERE sid IN (SELECT sid FROM doomed_sids)`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return 0, err
		}
	}
	if err := resummarizeSessionless(ctx, tx); err != nil {
		return 0, err
	}
	return uint64(n), nil
}

// resummarizeSessionless brings the summary and rollups of the events of
// no session in line with the rows left.
func resummarizeSessionless(ctx context.Context, tx *sql.Tx) error {
	for _, q := range []string{
		`UPDATE sessions SET events = (SELECT count(*) FROM events WHERE sid = sessions.sid),
			first_ts = (SELECT min(ts) FROM events WHERE sid = sessions.sid) WHERE session_id = ''`,
		`DELETE FROM path_sessions WHERE sid = (SELECT sid FROM sessions WHERE session_id = '')
			AND NOT EXISTS (SELECT 1 FROM files f WHERE f.path_id = path_sessions.path_id AND f.sid = path_sessions.sid)`,
		`DELETE FROM domain_sessions WHERE sid = (SELECT sid FROM sessions WHERE session_id = '')
			AND NOT EXISTS (SELECT 1 FROM nets n WHERE n.domain_id = domain_sessions.domain_id AND n.sid = domain_sessions.sid)`,
		`DELETE FROM pkg_sessions WHERE sid = (SELECT sid FROM sessions WHERE session_id = '')
			AND NOT EXISTS (SELECT 1 FROM pkgs p WHERE p.pkg_id = pkg_sessions.pkg_id AND p.sid = pkg_sessions.sid)`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}
