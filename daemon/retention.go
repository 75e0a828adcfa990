package daemon

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/record/archive"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/sink"
	"github.com/sandtrail/sandtrail/record/tap"
)

// Retention applies the retention policy (docs/retention.md) to one
// journal and its index: it prunes, from both, the sessions that ended
// more than HotDays ago and the entries of no session older than that,
// never a session under a legal hold, and journals what it pruned
// (retention.prune); it places and lifts the holds (retention.hold,
// retention.release), whose set it derives from the record itself.
//
// The daemon builds one over its journal and index, applies it daily and
// serves it on the control socket; `sandtrail retention` and `sandtrail
// hold` build one over the journal they open themselves when no daemon
// runs (the journal's lock makes that exclusive). Its methods run one at a
// time.
type Retention struct {
	// Journal is the journal, opened by this process (its one writer).
	Journal *journal.Journal
	// Index is the journal's index.
	Index *index.Index
	// Append journals the retention events (default: Journal). The daemon
	// appends through its tap, so that the live rules see them.
	Append tap.Appender
	// HotDays is the hot window in days; 0 turns pruning off.
	HotDays int
	// Host names this machine in the events.
	Host string
	// Archive, when not nil, is called before each session is pruned, so
	// that the cold tier (record/archive: a sealed bundle of the session,
	// pushed to a directory or a registry) can keep it first. A session
	// whose Archive fails is not pruned: the report lists it as failed,
	// and the next run tries again. It is given the seqs to prune, and
	// returns nil only once the cold tier holds every one of them.
	// Archive must be idempotent: a prune
	// interrupted after it (a crash) calls it again for the same session.
	Archive func(ctx context.Context, sessionID string, seqs []uint64) error
	// Unsent, when not nil, is the lowest cursor of the sinks (the first
	// seq one of them has yet to send): entries at or past it are not
	// pruned, so that a sink that lags still sends them (the report lists
	// their sessions as unsent).
	Unsent func() (uint64, error)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log is the logger (default: none).
	Log hclog.Logger

	mu sync.Mutex
}

// Limits of the retention events and of a hold's words.
const (
	maxPruneSessions = 1024 // sessions listed by one retention.prune event
	maxPruneRanges   = 4096 // seq ranges listed by one retention.prune event
	maxHoldReason    = 1024
)

// ErrRetentionOff is Apply's error when HotDays is 0.
var ErrRetentionOff = errors.New("retention is off (retention.hot_days is 0)")

// retentionPlan is what Apply would prune: the report, and the seqs behind
// it.
type retentionPlan struct {
	rep         *control.RetentionReport
	seqs        map[string][]uint64 // by session
	sessionless []uint64
}

func (r *Retention) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Retention) log() hclog.Logger {
	if r.Log == nil {
		return hclog.NewNullLogger()
	}
	return r.Log.Named("retention")
}

func (r *Retention) appender() tap.Appender {
	if r.Append != nil {
		return r.Append
	}
	return r.Journal
}

// Apply prunes what the policy says is past the hot window, from the
// journal (tombstones, in sealed segments a signed checkpoint covers) and
// then the index (rows deleted), and journals what it pruned. A dry run
// only reports what it would prune, changing nothing. uid is who asked,
// recorded in the retention.prune events.
func (r *Retention) Apply(ctx context.Context, dryRun bool, uid uint32) (*control.RetentionReport, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.HotDays <= 0 {
		return nil, ErrRetentionOff
	}
	p, err := r.plan(ctx)
	if err != nil {
		return nil, err
	}
	p.rep.DryRun = dryRun
	if dryRun {
		return p.rep, nil
	}
	r.archive(ctx, p)
	seqs := slices.Concat(p.sessionless)
	var gone []string
	for _, s := range p.rep.Sessions {
		seqs = append(seqs, p.seqs[s.ID]...)
		gone = append(gone, s.ID)
	}
	if len(seqs) == 0 {
		return p.rep, nil
	}
	// The record of the prune first: the journal prunes only what a
	// retention.prune entry names (and Verify holds it to that), and a
	// prune that fails after it leaves a record of more than was done,
	// never tombstones that nothing records. Then the journal, then the
	// index: a crash before the index forgets leaves rows that the next
	// run finds and prunes again (the tombstones stay).
	evs := pruneEvents(p, r.Host, uid)
	if err := r.appender().Append(ctx, evs...); err != nil {
		return nil, fmt.Errorf("journaling the prune: %w", err)
	}
	for _, e := range evs {
		p.rep.Events = append(p.rep.Events, e.Seq)
	}
	res, err := r.Journal.Prune(ctx, seqs, p.rep.Events)
	if err != nil {
		return nil, fmt.Errorf("pruning the journal: %w", err)
	}
	p.rep.Journal = &res
	if p.rep.Forgotten, err = r.Index.Forget(ctx, index.Pruned{Seqs: seqs, Sessions: gone}); err != nil {
		return nil, fmt.Errorf("pruning the index: %w", err)
	}
	r.log().Info("retention applied", "sessions", len(p.rep.Sessions), "entries", p.rep.Entries,
		"held", len(p.rep.Held), "failed", len(p.rep.Failed), "segments", res.Segments)
	return p.rep, nil
}

// plan reads from the index, caught up first, what Apply would prune.
func (r *Retention) plan(ctx context.Context) (*retentionPlan, error) {
	if _, err := r.Index.CatchUp(ctx, r.Journal.Dir()); err != nil {
		return nil, fmt.Errorf("catching the index up with the journal: %w", err)
	}
	cutoff := r.now().UTC().Add(-time.Duration(r.HotDays) * 24 * time.Hour)
	p := &retentionPlan{seqs: map[string][]uint64{}, rep: &control.RetentionReport{HotDays: r.HotDays, Cutoff: cutoff,
		Sessions: []control.RetentionSession{}, Held: []control.RetentionSession{}, Failed: []control.RetentionSession{},
		Unsent: []control.RetentionSession{}}}
	holds, err := r.Index.Holds(ctx)
	if err != nil {
		return nil, err
	}
	held := map[string]index.Hold{}
	for _, h := range holds {
		held[h.Session] = h
	}
	ended, err := r.Index.EndedBefore(ctx, cutoff)
	if err != nil {
		return nil, err
	}
	for _, e := range ended {
		s := control.RetentionSession{ID: e.ID, Entries: e.Events, LastTS: e.LastTS, EndReason: e.Reason}
		if h, ok := held[e.ID]; ok {
			s.Hold = &h
			p.rep.Held = append(p.rep.Held, s)
			continue
		}
		seqs, err := r.Index.SessionSeqs(ctx, e.ID)
		if err != nil {
			return nil, err
		}
		s.Entries, s.Ranges = uint64(len(seqs)), event.SeqRanges(seqs)
		p.seqs[e.ID] = seqs
		p.rep.Sessions = append(p.rep.Sessions, s)
		p.rep.Entries += s.Entries
	}
	if p.sessionless, err = r.Index.SessionlessBefore(ctx, cutoff); err != nil {
		return nil, err
	}
	if err := r.holdUnsent(p); err != nil {
		return nil, err
	}
	p.rep.Sessionless, p.rep.SessionlessRanges = uint64(len(p.sessionless)), event.SeqRanges(p.sessionless)
	p.rep.Entries += p.rep.Sessionless
	return p, nil
}

// holdUnsent moves out of p what a sink has yet to send: the sessions
// with an entry at or past the lowest sink cursor, to the report's
// unsent, and such entries of no session.
func (r *Retention) holdUnsent(p *retentionPlan) error {
	if r.Unsent == nil {
		return nil
	}
	cursor, err := r.Unsent()
	if err != nil {
		return fmt.Errorf("reading the sinks' cursors: %w", err)
	}
	p.rep.Sessions = slices.DeleteFunc(p.rep.Sessions, func(s control.RetentionSession) bool {
		seqs := p.seqs[s.ID]
		if len(seqs) == 0 || slices.Max(seqs) < cursor {
			return false
		}
		p.rep.Unsent = append(p.rep.Unsent, s)
		p.rep.Entries -= s.Entries
		delete(p.seqs, s.ID)
		return true
	})
	before := len(p.sessionless)
	p.sessionless = slices.DeleteFunc(p.sessionless, func(seq uint64) bool { return seq >= cursor })
	p.rep.UnsentSessionless = uint64(before - len(p.sessionless))
	return nil
}

// archive calls the archiver for each session to prune, moving the ones
// it fails for from the report's sessions to its failed ones.
func (r *Retention) archive(ctx context.Context, p *retentionPlan) {
	if r.Archive == nil {
		return
	}
	keep := p.rep.Sessions[:0]
	for _, s := range p.rep.Sessions {
		if err := r.Archive(ctx, s.ID, p.seqs[s.ID]); err != nil {
			r.log().Warn("archiving a session failed; it is not pruned", "session_id", s.ID, "error", err)
			s.Error = err.Error()
			p.rep.Failed = append(p.rep.Failed, s)
			p.rep.Entries -= s.Entries
			delete(p.seqs, s.ID)
			continue
		}
		keep = append(keep, s)
	}
	p.rep.Sessions = keep
}

// pruneEvents are the retention.prune events that record what p pruned:
// its sessions with their entries and seq ranges, then the entries of no
// session, spread over as many events as keep each within
// maxPruneSessions sessions and maxPruneRanges ranges (a session with
// more ranges appears in several, each with its entries there). The
// first also names the sessions a hold kept.
func pruneEvents(p *retentionPlan, host string, uid uint32) []*event.Event {
	base := event.Retention{Op: event.RetentionPrune, UID: event.U32(uid), Actor: control.ActorName(uid),
		HotDays: p.rep.HotDays, Cutoff: p.rep.Cutoff}
	for _, h := range p.rep.Held {
		base.Held = append(base.Held, h.ID)
	}
	var evs []*event.Event
	cur := base
	flush := func() {
		c := cur
		evs = append(evs, &event.Event{Kind: event.KindRetentionPrune, Source: event.SourceJournal, Host: host, Retention: &c})
		cur = base
		cur.Held = nil
	}
	add := func(id string, runs []event.SeqRange) {
		for len(runs) > 0 {
			room := maxPruneRanges - len(cur.Ranges)
			if room == 0 || id != "" && len(cur.Sessions) == maxPruneSessions {
				flush()
				continue
			}
			k := min(room, len(runs))
			var n uint64
			for _, r := range runs[:k] {
				n += r.Last - r.First + 1
			}
			if id == "" {
				cur.Sessionless += n
			} else {
				cur.Sessions = append(cur.Sessions, event.PrunedSession{ID: id, Entries: n})
			}
			cur.Entries += n
			cur.Ranges = append(cur.Ranges, runs[:k]...)
			runs = runs[k:]
		}
	}
	for _, s := range p.rep.Sessions {
		add(s.ID, s.Ranges)
	}
	add("", p.rep.SessionlessRanges)
	if cur.Entries > 0 {
		flush()
	}
	return evs
}

// Holds returns the legal holds in force, from the index caught up with
// the journal.
func (r *Retention) Holds(ctx context.Context) ([]index.Hold, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.Index.CatchUp(ctx, r.Journal.Dir()); err != nil {
		return nil, fmt.Errorf("catching the index up with the journal: %w", err)
	}
	return r.Index.Holds(ctx)
}

// Hold places a legal hold on a session of the record, for reason, on
// behalf of uid: it journals a retention.hold event, and from then on
// Apply never prunes the session, until Release.
func (r *Retention) Hold(ctx context.Context, session, reason string, uid uint32) (*index.Hold, error) {
	return r.setHold(ctx, event.KindRetentionHold, session, reason, uid)
}

// Release lifts the legal hold on a session, for reason, on behalf of uid,
// journaling a retention.release event.
func (r *Retention) Release(ctx context.Context, session, reason string, uid uint32) error {
	_, err := r.setHold(ctx, event.KindRetentionRelease, session, reason, uid)
	return err
}

// setHold journals a hold or a release of a session, after checking that
// it changes something, and returns the holds' new state for the session.
func (r *Retention) setHold(ctx context.Context, kind, session, reason string, uid uint32) (*index.Hold, error) {
	if err := checkHold(session, reason); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.Index.CatchUp(ctx, r.Journal.Dir()); err != nil {
		return nil, fmt.Errorf("catching the index up with the journal: %w", err)
	}
	holds, err := r.Index.Holds(ctx)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(holds, func(h index.Hold) bool { return h.Session == session })
	switch {
	case kind == event.KindRetentionHold && i >= 0:
		return nil, fmt.Errorf("session %s is held already, since %s (%s)", session, holds[i].Since.Format(time.RFC3339), holds[i].Reason)
	case kind == event.KindRetentionRelease && i < 0:
		return nil, fmt.Errorf("session %s is not held", session)
	case kind == event.KindRetentionHold:
		if ok, err := r.Index.HasSession(ctx, session); err != nil {
			return nil, err
		} else if !ok {
			return nil, fmt.Errorf("no session %q in the record (never recorded, or pruned already)", session)
		}
	}
	op := event.RetentionHold
	if kind == event.KindRetentionRelease {
		op = event.RetentionRelease
	}
	e := &event.Event{Kind: kind, Source: event.SourceJournal, Host: r.Host, Retention: &event.Retention{Op: op, Session: session,
		Reason: reason, UID: event.U32(uid), Actor: control.ActorName(uid)}}
	if err := r.appender().Append(ctx, e); err != nil {
		return nil, fmt.Errorf("journaling the %s: %w", op, err)
	}
	r.log().Info("legal "+op, "session_id", session, "reason", reason, "uid", uid, "seq", e.Seq)
	return &index.Hold{Session: session, Reason: reason, UID: event.U32(uid), Actor: e.Retention.Actor, Since: e.TS, Seq: e.Seq}, nil
}

// checkHold checks a hold's or release's session and reason.
func checkHold(session, reason string) error {
	switch {
	case session == "":
		return errors.New("name the session")
	case len(session) > 128:
		return errors.New("a session id is at most 128 bytes")
	case reason == "":
		return errors.New("say why (--reason): the record keeps it with the hold")
	case len(reason) > maxHoldReason:
		return fmt.Errorf("the reason is at most %d bytes", maxHoldReason)
	}
	return nil
}

// RunRetention applies the policy every interval until ctx ends, the first
// time after first, logging what it did; uid is the daemon's own.
func (r *Retention) RunRetention(ctx context.Context, first, interval time.Duration) {
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := r.Apply(ctx, false, uint32(os.Getuid())); err != nil && ctx.Err() == nil {
			r.log().Error("applying the retention policy failed", "error", err)
		}
		t.Reset(interval)
	}
}

// The daemon serves the retention policy on the control socket.
var _ control.Retainer = (*Daemon)(nil)

var _ control.Investigator = (*Daemon)(nil)

// retention returns the policy over the daemon's index, once the index
// follower opened it.
func (d *Daemon) retention(ctx context.Context) (*Retention, error) {
	if d.ixReady == nil {
		return nil, errors.New("this daemon keeps no index, so applies no retention policy")
	}
	select {
	case <-d.ixReady:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if d.ret == nil {
		return nil, errors.New("the daemon's index could not be opened (see its log): no retention policy")
	}
	return d.ret, nil
}

// ApplyRetention applies the retention policy now, for the control socket.
func (d *Daemon) ApplyRetention(ctx context.Context, dryRun bool, uid uint32) (*control.RetentionReport, error) {
	r, err := d.retention(ctx)
	if err != nil {
		return nil, err
	}
	return r.Apply(ctx, dryRun, uid)
}

// Hold places a legal hold, for the control socket.
func (d *Daemon) Hold(ctx context.Context, session, reason string, uid uint32) (*index.Hold, error) {
	r, err := d.retention(ctx)
	if err != nil {
		return nil, err
	}
	return r.Hold(ctx, session, reason, uid)
}

// Release lifts a legal hold, for the control socket.
func (d *Daemon) Release(ctx context.Context, session, reason string, uid uint32) error {
	r, err := d.retention(ctx)
	if err != nil {
		return err
	}
	return r.Release(ctx, session, reason, uid)
}

// Holds lists the legal holds, for the control socket.
func (d *Daemon) Holds(ctx context.Context) ([]index.Hold, error) {
	r, err := d.retention(ctx)
	if err != nil {
		return nil, err
	}
	return r.Holds(ctx)
}

// SinkCursors is the Unsent hook of c's sinks (nil when none is
// configured): the lowest of their durable cursors, as stored in
// <data_dir>/sinks.
func (c *Config) SinkCursors() func() (uint64, error) {
	if len(c.Sinks) == 0 {
		return nil
	}
	return func() (uint64, error) {
		low := uint64(math.MaxUint64)
		for _, sc := range c.Sinks {
			n, err := sink.StoredCursor(c.SinksDir(), sc.Name)
			if err != nil {
				return 0, err
			}
			low = min(low, n)
		}
		return low, nil
	}
}

// ColdTier is the archiver hook of c's retention.archive (nil when none is
// set): it seals a session into a bundle, stores it there, and checks the
// stored bundle against the live journal (archive.Archiver), with the
// verifier key beside key_file.
func (c *Config) ColdTier(ix *index.Index) (func(ctx context.Context, sessionID string, seqs []uint64) error, error) {
	if c.Retention.Archive == "" {
		return nil, nil
	}
	var opts []archive.StoreOption
	if c.Retention.ArchivePlainHTTP {
		opts = append(opts, archive.AllowPlainHTTP())
	}
	store, err := archive.OpenStore(c.Retention.Archive, opts...)
	if err != nil {
		return nil, fmt.Errorf("retention.archive: %w", err)
	}
	verifiers, err := journal.LoadVerifiers(journal.VerifierPath(c.KeyFile))
	if err != nil {
		return nil, fmt.Errorf("retention.archive: the verifier key beside key_file: %w", err)
	}
	a := archive.NewArchiver(c.JournalDir(), ix, verifiers, store)
	return func(ctx context.Context, sessionID string, seqs []uint64) error {
		if _, err := a.Archive(ctx, sessionID); err != nil {
			return err
		}
		return a.HoldsEntries(ctx, sessionID, seqs)
	}, nil
}
