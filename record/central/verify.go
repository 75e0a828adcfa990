package central

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"
)

// Chain is the state of the verification of one host's journal.
type Chain struct {
	Host string `json:"host"`
	// Next is how many of its entries, 0..Next-1, are folded into the
	// tree; Verified the size of the newest signed checkpoint they
	// matched, at VerifiedAt.
	Next       uint64    `json:"next"`
	Verified   uint64    `json:"verified"`
	VerifiedAt time.Time `json:"verified_at,omitzero"`
	// Received is the highest seq of the host the store holds, plus one.
	Received uint64 `json:"received"`
	// StalledSince is when the verification first waited on a missing
	// entry that a checkpoint covers; Broken says why it stopped for good.
	StalledSince time.Time `json:"stalled_since,omitzero"`
	Broken       string    `json:"broken,omitempty"`
	// Known says whether the store has the host's key.
	Known bool `json:"known"`
}

// verifyBatch bounds the leaves read in one query.
const verifyBatch = 10000

// Verify advances the verification of host's chain as far as the entries
// and signed checkpoints it holds allow, raising what it finds. Another
// aggregator verifying the same host at the same time makes it return at
// once: each host's chain has one verifier at a time (a row lock).
func (s *Store) Verify(ctx context.Context, host string) error {
	if host == "" {
		return nil // the store's own entries: no chain
	}
	hids, err := s.hostIDs(ctx, []string{host})
	if err != nil {
		return err
	}
	hid := hids[host]
	if s.keys[host] == nil {
		var first int64
		err := s.pool.QueryRow(ctx, `SELECT coalesce(min(seq), 0) FROM entries WHERE hid = $1`, hid).Scan(&first)
		if err != nil {
			return fmt.Errorf("central store: %w", err)
		}
		return s.Raise(ctx, unknownHost(host, uint64(first)))
	}
	var found []Problem
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		found, err = s.advance(ctx, tx, host, hid)
		return err
	})
	if err != nil {
		return fmt.Errorf("central store: verifying host %s: %w", host, err)
	}
	for _, p := range found {
		if err := s.Raise(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// chainRow is a chains row, locked.
type chainRow struct {
	next, verified int64
	stack          []byte
	stalled        *time.Time
	broken         *string
}

// lockChain locks host's chain row, making it if need be; ok is false
// when another verifier holds it.
func lockChain(ctx context.Context, tx pgx.Tx, hid int32) (c chainRow, ok bool, err error) {
	if _, err := tx.Exec(ctx, `INSERT INTO chains(hid) VALUES($1) ON CONFLICT DO NOTHING`, hid); err != nil {
		return c, false, err
	}
	err = tx.QueryRow(ctx, `SELECT next, verified, stack, stalled_since, broken FROM chains WHERE hid = $1 FOR UPDATE SKIP LOCKED`, hid).
		Scan(&c.next, &c.verified, &c.stack, &c.stalled, &c.broken)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	return c, err == nil, err
}

// checkpointAt is a stored checkpoint's size and root.
type checkpointAt struct {
	size uint64
	root tlog.Hash
}

// advance folds the host's entries into its tree up to the newest signed
// checkpoint, checking the root at each checkpoint on the way.
func (s *Store) advance(ctx context.Context, tx pgx.Tx, host string, hid int32) ([]Problem, error) {
	c, ok, err := lockChain(ctx, tx, hid)
	if err != nil || !ok || c.broken != nil {
		return nil, err
	}
	cps, err := pendingCheckpoints(ctx, tx, hid, c.verified)
	if err != nil || len(cps) == 0 {
		return nil, err
	}
	tree, err := unmarshalRange(uint64(c.next), c.stack)
	if err != nil {
		return nil, err
	}
	var found []Problem
	verified, broken := uint64(c.verified), ""
	target := cps[len(cps)-1].size
	for tree.n < target && broken == "" {
		n, err := foldLeaves(ctx, tx, hid, tree, target, func(at uint64) bool {
			for len(cps) > 0 && cps[0].size < at {
				cps = cps[1:] // passed before it arrived: the later one covers it
			}
			if len(cps) == 0 || cps[0].size != at {
				return true
			}
			if tree.root() != cps[0].root {
				broken = fmt.Sprintf("entries %d..%d do not hash to checkpoint %d", verified, at-1, at)
				found = append(found, Problem{Host: host, Seq: verified, Kind: ProblemMismatch,
					Detail: fmt.Sprintf("host %s entries %d..%d do not hash to the root of its signed checkpoint %d: one of them was altered", host, verified, at-1, at)})
				return false
			}
			verified, cps = at, cps[1:]
			return true
		})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break // a gap
		}
	}
	p, err := s.saveChain(ctx, tx, host, hid, c, tree, verified, broken, target)
	if p != nil {
		found = append(found, *p)
	}
	return found, err
}

// pendingCheckpoints are host's stored checkpoints beyond size verified,
// smallest first.
func pendingCheckpoints(ctx context.Context, tx pgx.Tx, hid int32, verified int64) ([]checkpointAt, error) {
	rows, err := tx.Query(ctx, `SELECT size, root FROM checkpoints WHERE hid = $1 AND size > $2 ORDER BY size`, hid, verified)
	if err != nil {
		return nil, err
	}
	var out []checkpointAt
	var size int64
	var root []byte
	_, err = pgx.ForEachRow(rows, []any{&size, &root}, func() error {
		out = append(out, checkpointAt{size: uint64(size), root: tlog.Hash(root)})
		return nil
	})
	return out, err
}

// foldLeaves folds the host's next contiguous leaves, up to size target,
// into tree, calling at after each with the tree's new size; at returning
// false stops it. It returns how many it folded: 0 when the next entry
// has not arrived.
func foldLeaves(ctx context.Context, tx pgx.Tx, hid int32, tree *compactRange, target uint64, at func(uint64) bool) (int, error) {
	rows, err := tx.Query(ctx, `SELECT seq, leaf FROM entries WHERE hid = $1 AND seq >= $2 AND seq < $3 ORDER BY seq LIMIT $4`,
		hid, int64(tree.n), int64(target), verifyBatch)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var seq int64
		var leaf []byte
		if err := rows.Scan(&seq, &leaf); err != nil {
			return n, err
		}
		if uint64(seq) != tree.n || len(leaf) != tlog.HashSize {
			break
		}
		tree.append(tlog.Hash(leaf))
		n++
		if !at(tree.n) {
			break
		}
	}
	return n, rows.Err()
}

// saveChain stores the chain's new state. A verification that waits on a
// missing entry under a signed checkpoint for longer than the grace period
// raises a gap.
func (s *Store) saveChain(ctx context.Context, tx pgx.Tx, host string, hid int32, c chainRow, tree *compactRange,
	verified uint64, broken string, target uint64) (*Problem, error) {
	now := s.now()
	var stalled *time.Time
	var gap *Problem
	if broken == "" && tree.n < target {
		// The wait starts when the chain stops moving: one that folds
		// entries while it lags its newest checkpoint waits on nothing.
		stalled = &now
		if c.stalled != nil && tree.n == uint64(c.next) {
			stalled = c.stalled
		}
		if now.Sub(*stalled) >= s.grace() {
			var next int64
			err := tx.QueryRow(ctx, `SELECT coalesce(min(seq), $3) FROM entries WHERE hid = $1 AND seq > $2`, hid, int64(tree.n), int64(target)).Scan(&next)
			if err != nil {
				return nil, err
			}
			gap = &Problem{Host: host, Seq: tree.n, Kind: ProblemGap,
				Detail: fmt.Sprintf("host %s entries %d..%d, which its signed checkpoint %d covers, have not arrived in %s", host, tree.n, next-1, target, now.Sub(*stalled).Round(time.Second))}
		}
	}
	var brokenArg any
	if broken != "" {
		brokenArg = broken
	}
	_, err := tx.Exec(ctx, `UPDATE chains SET next = $2, stack = $3, verified = $4,
		verified_at = CASE WHEN $4 > verified THEN now() ELSE verified_at END, stalled_since = $5, broken = $6 WHERE hid = $1`,
		hid, int64(tree.n), tree.marshal(), int64(verified), stalled, brokenArg)
	return gap, err
}

func (s *Store) grace() time.Duration {
	if s.gapGrace > 0 {
		return s.gapGrace
	}
	return 2 * time.Minute
}

// Chains returns the state of every host's chain verification.
func (s *Store) Chains(ctx context.Context) ([]Chain, error) {
	rows, err := s.pool.Query(ctx, `SELECT h.host, coalesce(c.next, 0), coalesce(c.verified, 0), c.verified_at, c.stalled_since, c.broken,
		(SELECT coalesce(max(seq) + 1, 0) FROM entries e WHERE e.hid = h.hid)
		FROM hosts h LEFT JOIN chains c ON c.hid = h.hid WHERE h.hid <> 0 ORDER BY h.host`)
	if err != nil {
		return nil, fmt.Errorf("central store: reading chains: %w", err)
	}
	var out []Chain
	var ch Chain
	var next, verified, received int64
	var vat, stalled *time.Time
	var broken *string
	_, err = pgx.ForEachRow(rows, []any{&ch.Host, &next, &verified, &vat, &stalled, &broken, &received}, func() error {
		c := Chain{Host: ch.Host, Next: uint64(next), Verified: uint64(verified), Received: uint64(received), Known: s.keys[ch.Host] != nil}
		if vat != nil {
			c.VerifiedAt = vat.UTC()
		}
		if stalled != nil {
			c.StalledSince = stalled.UTC()
		}
		if broken != nil {
			c.Broken = *broken
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("central store: reading chains: %w", err)
	}
	return out, nil
}

// SessionChain is how far the chain verification vouches for one
// session's entries.
type SessionChain struct {
	Host string
	// Entries counts the session's entries, Covered those a verified
	// checkpoint covers.
	Entries, Covered uint64
	// Broken is the host's chain's, Problems the integrity problems raised
	// about the host that say its record was forged (TamperProblems).
	Broken   string
	Problems int
}

// TamperProblems are the problems that say a host's record was forged or
// altered, which make its sessions tampered. The others do not: an
// unknown_host is a host not yet enrolled (its chain verifies from 0 once
// its key is given), a gap leaves what follows it uncovered until the
// entries come, and an unreadable message is nobody's record.
var TamperProblems = []string{ProblemUnknownKey, ProblemBadSignature, ProblemBadCheckpoint, ProblemFork,
	ProblemCheckpointFork, ProblemMismatch, ProblemSessionConflict, ProblemForgedAlert, ProblemHostMismatch}

// SessionChain returns the verification's account of session's entries.
func (s *Store) SessionChain(ctx context.Context, session string) (SessionChain, error) {
	var sc SessionChain
	var verified, entries, covered int64
	var broken *string
	var problems int
	err := s.pool.QueryRow(ctx, `SELECT h.host, coalesce(c.verified, 0), c.broken, count(*), count(*) FILTER (WHERE e.seq >= 0 AND e.seq < coalesce(c.verified, 0)),
		(SELECT count(*) FROM integrity i WHERE i.hid = e.hid AND i.problem = ANY($2))
		FROM sessions s JOIN events e ON e.sid = s.sid JOIN hosts h ON h.hid = e.hid LEFT JOIN chains c ON c.hid = e.hid
		WHERE s.session_id = $1 AND e.hid <> 0 GROUP BY h.host, e.hid, c.verified, c.broken ORDER BY count(*) DESC LIMIT 1`, session, TamperProblems).
		Scan(&sc.Host, &verified, &broken, &entries, &covered, &problems)
	if errors.Is(err, pgx.ErrNoRows) {
		return sc, nil
	}
	if err != nil {
		return sc, fmt.Errorf("central store: reading the chain of session %s: %w", session, err)
	}
	sc.Entries, sc.Covered, sc.Problems = uint64(entries), uint64(covered), problems
	if broken != nil {
		sc.Broken = *broken
	}
	return sc, nil
}
