package central

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/sink"
)

// Entry is one journal entry of a host, as the stream carries it: the
// host's name (a subject token), its seq, and the stored event's bytes.
type Entry struct {
	Host string
	Seq  uint64
	Raw  []byte
}

// Result is what one Write did.
type Result struct {
	// Added counts the entries stored, Duplicates those it already held
	// byte for byte, Skipped the added ones that did not decode as events
	// (kept as leaves, in no question's table).
	Added, Duplicates, Skipped int
	// Hosts are the hosts whose entries were added.
	Hosts []string
}

// row is an entry on its way into the tables.
type row struct {
	hid  int32
	seq  int64
	raw  []byte
	leaf []byte
	ev   *event.Event // nil when it does not decode
	err  string
	sid  int64
	keys index.Keys
}

// Write stores batch in one transaction, once per (host, seq). An entry
// held already with other bytes, or twice in the batch with different
// bytes, is a fork: it is not stored, and raises an integrity alert.
func (s *Store) Write(ctx context.Context, batch []Entry) (Result, error) {
	var res Result
	if len(batch) == 0 {
		return res, nil
	}
	day := s.today()
	if err := s.ensureDays(ctx, day); err != nil {
		return res, err
	}
	rows, forks, repeats, err := s.rows(ctx, batch)
	if err != nil {
		return res, err
	}
	var stored []Problem
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res, stored, err = s.write(ctx, tx, rows, day)
		return err
	})
	if err != nil {
		s.forgetDicts()
		return Result{}, fmt.Errorf("central store: writing %d entries: %w", len(batch), err)
	}
	res.Duplicates += repeats
	for _, p := range append(forks, stored...) {
		if err := s.Raise(ctx, p); err != nil {
			return res, err
		}
	}
	return res, nil
}

// today is the day (since 1970-01-01, UTC) whose partitions take what is
// written now.
func (s *Store) today() int32 { return int32(s.now().UTC().Unix() / 86400) }

// rows gives each entry of batch its host id and leaf hash, in (hid, seq)
// order with the batch's repeats folded (and counted); a repeat with other
// bytes is a fork.
func (s *Store) rows(ctx context.Context, batch []Entry) (rows []*row, forks []Problem, repeats int, err error) {
	hosts := make([]string, 0, 4)
	for _, e := range batch {
		if !slices.Contains(hosts, e.Host) {
			hosts = append(hosts, e.Host)
		}
	}
	hids, err := s.hostIDs(ctx, hosts)
	if err != nil {
		return nil, nil, 0, err
	}
	byKey := make(map[[2]int64]*row, len(batch))
	out := make([]*row, 0, len(batch))
	for _, e := range batch {
		if len(e.Host) > 255 || !utf8.ValidString(e.Host) || strings.ContainsRune(e.Host, 0) {
			return nil, nil, 0, fmt.Errorf("central store: host %.60q: want at most 255 bytes of UTF-8 without NUL", e.Host)
		}
		if e.Seq > math.MaxInt64 {
			return nil, nil, 0, fmt.Errorf("central store: host %s entry %d: a seq beyond a bigint (the aggregator refuses it)", e.Host, e.Seq)
		}
		leaf := journal.LeafHash(e.Raw)
		k := [2]int64{int64(hids[e.Host]), int64(e.Seq)}
		if r := byKey[k]; r != nil {
			if !bytes.Equal(r.leaf, leaf[:]) {
				forks = append(forks, forkProblem(e.Host, e.Seq, "two entries of one batch"))
			} else {
				repeats++
			}
			continue
		}
		r := &row{hid: hids[e.Host], seq: int64(e.Seq), raw: e.Raw, leaf: leaf[:]}
		byKey[k] = r
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].hid < out[j].hid || out[i].hid == out[j].hid && out[i].seq < out[j].seq
	})
	return out, forks, repeats, nil
}

func forkProblem(host string, seq uint64, how string) Problem {
	return Problem{Host: host, Seq: seq, Kind: ProblemFork,
		Detail: fmt.Sprintf("host %s entry %d arrived with different bytes (%s): the host's record forked, or someone else published as the host", host, seq, how)}
}

// write is Write's transaction: the entries first, which says which rows
// are new, then the new rows' events, side rows and summaries.
func (s *Store) write(ctx context.Context, tx pgx.Tx, rows []*row, day int32) (Result, []Problem, error) {
	var res Result
	fresh, forks, err := s.insertEntries(ctx, tx, rows, day)
	if err != nil {
		return res, nil, err
	}
	res.Duplicates = len(rows) - len(fresh) - len(forks)
	res.Added = len(fresh)
	for _, r := range fresh {
		h := s.hostName(r.hid)
		if p := decode(r, h); p != nil {
			forks = append(forks, *p)
		}
		if !slices.Contains(res.Hosts, h) {
			res.Hosts = append(res.Hosts, h)
		}
	}
	if len(fresh) == 0 {
		return res, forks, nil
	}
	problems, err := s.insertRows(ctx, tx, fresh, day)
	if err != nil {
		return res, nil, err
	}
	for _, r := range fresh {
		if r.ev == nil {
			res.Skipped++
		}
	}
	return res, append(forks, problems...), nil
}

// decode decodes r's event, an entry of host's, and derives its keys; an
// entry that is not UTF-8 or not an event is kept as skipped, as the index
// skips it. So is an event that names another host than the one that
// published it (its JSON, which the CLI prints, would say it is that
// host's), and an integrity alert that a host sent: only the store raises
// those. Both are forgeries, returned as a problem, raised once per host.
func decode(r *row, host string) *Problem {
	if !utf8.Valid(r.raw) {
		r.err = "decoding event: not UTF-8"
		return nil
	}
	ev, err := event.DecodeStored(r.raw)
	if err != nil {
		r.err = text(err.Error())
		return nil
	}
	if r.hid == 0 {
		r.ev, r.keys = ev, index.KeysOf(ev)
		return nil
	}
	if ev.Host != "" && sink.HostToken(ev.Host) != host {
		r.err = "an event that names another host than its publisher"
		return &Problem{Host: host, Seq: uint64(r.seq), Kind: ProblemHostMismatch, PerHost: true,
			Detail: fmt.Sprintf("entry %d of host %s names host %q: not indexed (this and later ones)", r.seq, host, event.Clip(ev.Host, 80))}
	}
	if ev.Alert != nil && ev.Alert.RuleID == IntegrityRule {
		r.err = "an integrity alert from a host: only the central store raises them"
		return &Problem{Host: host, Seq: uint64(r.seq), Kind: ProblemForgedAlert, PerHost: true,
			Detail: fmt.Sprintf("entry %d is an integrity alert (%q), which only the central store raises: not indexed (this and later ones)", r.seq, event.Clip(ev.Alert.Title, 200))}
	}
	r.ev, r.keys = ev, index.KeysOf(ev)
	return nil
}

// insertEntries inserts the rows' (hid, seq, leaf) and returns the rows
// that are new; of the others, those whose stored leaf differs are forks.
func (s *Store) insertEntries(ctx context.Context, tx pgx.Tx, rows []*row, day int32) (fresh []*row, forks []Problem, err error) {
	hid, seq, leaf := make([]int32, len(rows)), make([]int64, len(rows)), make([][]byte, len(rows))
	for i, r := range rows {
		hid[i], seq[i], leaf[i] = r.hid, r.seq, r.leaf
	}
	q, err := tx.Query(ctx, `INSERT INTO entries(hid, seq, day, leaf) SELECT h, s, $4, l FROM unnest($1::integer[], $2::bigint[], $3::bytea[]) AS u(h, s, l)
		ON CONFLICT DO NOTHING RETURNING hid, seq`, hid, seq, leaf, day)
	if err != nil {
		return nil, nil, fmt.Errorf("inserting entries: %w", err)
	}
	added := map[[2]int64]bool{}
	var h int32
	var sq int64
	if _, err := pgx.ForEachRow(q, []any{&h, &sq}, func() error { added[[2]int64{int64(h), sq}] = true; return nil }); err != nil {
		return nil, nil, fmt.Errorf("inserting entries: %w", err)
	}
	var held []*row
	for _, r := range rows {
		if added[[2]int64{int64(r.hid), r.seq}] {
			fresh = append(fresh, r)
		} else {
			held = append(held, r)
		}
	}
	if len(held) == 0 {
		return fresh, nil, nil
	}
	forks, err = s.heldForks(ctx, tx, held)
	return fresh, forks, err
}

// heldForks compares the rows the store held already with their stored
// leaves.
func (s *Store) heldForks(ctx context.Context, tx pgx.Tx, held []*row) ([]Problem, error) {
	hid, seq := make([]int32, len(held)), make([]int64, len(held))
	for i, r := range held {
		hid[i], seq[i] = r.hid, r.seq
	}
	q, err := tx.Query(ctx, `SELECT e.hid, e.seq, e.leaf FROM entries e JOIN unnest($1::integer[], $2::bigint[]) AS u(h, s)
		ON e.hid = u.h AND e.seq = u.s`, hid, seq)
	if err != nil {
		return nil, fmt.Errorf("reading held entries: %w", err)
	}
	stored := map[[2]int64][]byte{}
	var h int32
	var sq int64
	var l []byte
	if _, err := pgx.ForEachRow(q, []any{&h, &sq, &l}, func() error {
		stored[[2]int64{int64(h), sq}] = slices.Clone(l)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reading held entries: %w", err)
	}
	var forks []Problem
	for _, r := range held {
		if !bytes.Equal(stored[[2]int64{int64(r.hid), r.seq}], r.leaf) {
			forks = append(forks, forkProblem(s.hostName(r.hid), uint64(r.seq), "the store holds another"))
		}
	}
	return forks, nil
}

// now is the store's clock.
func (s *Store) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}
