package central

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sandtrail/sandtrail/record/event"
)

// The problems the chain verification raises.
const (
	// ProblemUnknownHost: entries of a host whose key the store was not
	// given (raised once per host).
	ProblemUnknownHost = "unknown_host"
	// ProblemUnknownKey: a checkpoint signed by another key than the
	// host's.
	ProblemUnknownKey = "unknown_key"
	// ProblemBadSignature: a checkpoint whose signature does not verify.
	ProblemBadSignature = "bad_signature"
	// ProblemBadCheckpoint: a checkpoint that does not parse.
	ProblemBadCheckpoint = "bad_checkpoint"
	// ProblemFork: an entry that arrived again with other bytes.
	ProblemFork = "fork"
	// ProblemCheckpointFork: two checkpoints of one size, both signed by
	// the host's key, with different roots.
	ProblemCheckpointFork = "checkpoint_fork"
	// ProblemMismatch: entries that do not hash to their signed
	// checkpoint: one of them was altered.
	ProblemMismatch = "mismatch"
	// ProblemGap: entries a signed checkpoint covers that have not arrived
	// within the grace period.
	ProblemGap = "gap"
	// ProblemSessionConflict: an entry of a host that names another
	// host's session.
	ProblemSessionConflict = "session_conflict"
	// ProblemForgedAlert: an integrity alert published by a host.
	ProblemForgedAlert = "forged_alert"
	// ProblemHostMismatch: an event whose host field names another host
	// than the one that published it.
	ProblemHostMismatch = "host_mismatch"
	// ProblemUnreadable: a message of the stream that no host's sink
	// sends (a subject or message id of another form), or an entry the
	// store refuses.
	ProblemUnreadable = "unreadable"
)

// IntegrityRule is the rule id of the integrity alerts.
const IntegrityRule = "integrity"

// Problem is one thing the verification found wrong with a host's record.
type Problem struct {
	Host string
	// Seq is the entry it is about (the first of a range).
	Seq  uint64
	Kind string
	// Detail says what was found, for the alert's summary.
	Detail string
	// PerHost makes it raised once per host rather than once per seq;
	// Key, when not 0, once per Key (one host's problems about one
	// session, say), so that a flood of one problem costs one alert.
	PerHost bool
	Key     int64
}

// Raise records p and journals its alert, once: an alert event (rule
// integrity, level critical) of the central store's own host, in the
// session of the entry it names when the store holds that entry.
func (s *Store) Raise(ctx context.Context, p Problem) error {
	hids, err := s.hostIDs(ctx, []string{p.Host, ""})
	if err != nil {
		return err
	}
	key := int64(p.Seq)
	switch {
	case p.PerHost:
		key = -1
	case p.Key != 0:
		key = -1 - p.Key // below every seq and -1
	}
	day := s.today()
	if err := s.ensureDays(ctx, day); err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var seq int64
		err := tx.QueryRow(ctx, `INSERT INTO integrity(hid, problem, key, seq, detail, alert_seq)
			VALUES($1, $2, $3, $4, $5, nextval('central_seq')) ON CONFLICT DO NOTHING RETURNING alert_seq`,
			hids[p.Host], p.Kind, key, int64(p.Seq), text(p.Detail)).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // raised before
		}
		if err != nil {
			return err
		}
		var session string
		err = tx.QueryRow(ctx, `SELECT s.session_id FROM events e JOIN sessions s ON s.sid = e.sid WHERE e.hid = $1 AND e.seq = $2`,
			hids[p.Host], int64(p.Seq)).Scan(&session)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		raw, err := event.Marshal(alertEvent(p, session, s.now()))
		if err != nil {
			return err
		}
		r := &row{hid: 0, seq: seq, raw: raw, leaf: make([]byte, 32)}
		_, _, err = s.write(ctx, tx, []*row{r}, day)
		return err
	})
	if err != nil {
		s.forgetDicts()
		return fmt.Errorf("central store: raising %s of host %s at %d: %w", p.Kind, p.Host, p.Seq, err)
	}
	s.log.Warn("integrity problem", "host", p.Host, "seq", p.Seq, "problem", p.Kind, "detail", p.Detail)
	return nil
}

// alertEvent is the integrity alert of p.
func alertEvent(p Problem, session string, now time.Time) *event.Event {
	return &event.Event{
		Kind: event.KindAlert, TS: now.UTC(), Source: event.SourceRules, SessionID: session,
		Alert: &event.Alert{
			RuleID: IntegrityRule, Title: "record integrity: " + p.Kind + " (host " + p.Host + ")", Level: "critical",
			Refs: []uint64{p.Seq}, Summary: fmt.Sprintf("host %s seq %d: %s", p.Host, p.Seq, p.Detail),
			Tags: []string{"attack.defense_evasion", "attack.t1565"},
		},
	}
}
