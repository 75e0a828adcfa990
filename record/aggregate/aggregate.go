// Package aggregate is `sandtrail aggregate`: it reads the hosts' records
// from their JetStream stream (the NATS sinks' subjects sandtrail.<host>.
// <kind>) through a durable pull consumer, writes them into the central
// store (record/central), and verifies each host's Merkle chain against its
// signed checkpoints as they arrive.
//
// It scales out by running more instances on the same durable consumer:
// JetStream hands each message to one of them, the store's writes are
// idempotent on (host, seq), and a host's chain has one verifier at a time.
// A message is acknowledged only once its entry is committed, so an
// aggregator killed at any point loses nothing: what it had not
// acknowledged is delivered again, to it when it restarts or to another.
//
// Trust: a message names its host by its subject, which the stream's
// permissions should bind to the host's credentials (docs/deployment.md);
// the aggregator believes nothing a message says until the host's signed
// checkpoint covers it. A message it cannot read is not retried for ever:
// it is acknowledged, and raises an integrity alert.
package aggregate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandtrail/sandtrail/record/central"
	"github.com/sandtrail/sandtrail/record/sink"
)

// Config configures an Aggregator.
type Config struct {
	// URL is the NATS server, or several, comma-separated.
	URL string
	// Stream is the hosts' stream (default "SANDTRAIL"), Consumer the
	// durable consumer the instances share (default "sandtrail-aggregate").
	Stream, Consumer string
	// Batch bounds the messages of one fetch and one write (default 4000).
	Batch int
	// VerifyEvery is how often every host's chain is verified again, for
	// the gaps that no arriving entry reports (default 10 s).
	VerifyEvery time.Duration
	// AckWait is how long JetStream waits for an acknowledgement before it
	// delivers a message again (default 60 s).
	AckWait time.Duration
	// CredsFile is the aggregator's NATS credentials, CAFile the CA of a
	// tls:// server; none when empty.
	CredsFile, CAFile string
}

func (c *Config) defaults() {
	if c.Stream == "" {
		c.Stream = "SANDTRAIL"
	}
	if c.Consumer == "" {
		c.Consumer = "sandtrail-aggregate"
	}
	if c.Batch <= 0 {
		c.Batch = 4000
	}
	if c.VerifyEvery <= 0 {
		c.VerifyEvery = 10 * time.Second
	}
	if c.AckWait <= 0 {
		c.AckWait = time.Minute
	}
}

// Status is an Aggregator's account of itself.
type Status struct {
	// Messages counts the messages handled, Added the entries it stored,
	// Duplicates those the store held already, Checkpoints the checkpoints,
	// Unreadable the messages it could not read, Redelivered those that
	// JetStream had delivered before (to an instance that stopped, or
	// whose AckWait ran out).
	Messages, Added, Duplicates, Checkpoints, Unreadable, Redelivered uint64
	// Pending is what the consumer has not yet delivered to any instance.
	Pending uint64
	// LastError is the last failed write's, until one succeeds.
	LastError string
}

// Aggregator moves the stream into the store.
type Aggregator struct {
	cfg   Config
	store *central.Store
	log   hclog.Logger
	nc    *nats.Conn
	cons  jetstream.Consumer

	unknown map[string]bool // hosts without a key, verified once (verifyAll)

	mu sync.Mutex
	st Status
}

// New connects to NATS and makes sure the durable consumer exists. It
// waits for the stream, which the hosts' sinks create, until ctx ends.
func New(ctx context.Context, cfg Config, store *central.Store, log hclog.Logger) (*Aggregator, error) {
	cfg.defaults()
	nc, err := nats.Connect(cfg.URL, sink.NATSOptions("sandtrail-aggregate", cfg.CredsFile, cfg.CAFile)...)
	if err != nil {
		return nil, fmt.Errorf("aggregate: connecting to %s: %w", cfg.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("aggregate: %w", err)
	}
	a := &Aggregator{cfg: cfg, store: store, log: log.Named("aggregate"), nc: nc, unknown: map[string]bool{}}
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		a.cons, err = js.CreateOrUpdateConsumer(ctx, cfg.Stream, jetstream.ConsumerConfig{
			Durable: cfg.Consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: cfg.AckWait,
			DeliverPolicy: jetstream.DeliverAllPolicy, FilterSubject: "sandtrail.>", MaxAckPending: 20 * cfg.Batch,
			MaxDeliver: -1,
		})
		if err == nil {
			return a, nil
		}
		a.log.Info("waiting for the stream", "stream", cfg.Stream, "error", err)
		select {
		case <-ctx.Done():
			nc.Close()
			return nil, fmt.Errorf("aggregate: consumer %s of stream %s: %w", cfg.Consumer, cfg.Stream, err)
		case <-time.After(wait):
		}
	}
}

// Close closes the NATS connection.
func (a *Aggregator) Close() error {
	a.nc.Close()
	return nil
}

// Status returns the aggregator's counts.
func (a *Aggregator) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}

// Run moves messages into the store until ctx ends, verifying every host's
// chain each VerifyEvery. A batch the store fails to take (it is down, a
// lock timed out) is written again, with a growing pause, while the
// aggregator holds its messages (InProgress, so that JetStream delivers
// none of them again meanwhile): an outage of the store delays the stream,
// and no delivery is spent on it. Only what the store refuses as data is
// raised and acknowledged (handle).
func (a *Aggregator) Run(ctx context.Context) error {
	next := time.Now().Add(a.cfg.VerifyEvery)
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		msgs, err := a.fetch()
		if err != nil {
			a.fail(ctx, err, &backoff)
			continue
		}
		backoff = 0
		err = a.handle(ctx, msgs)
		for ; err != nil && ctx.Err() == nil; err = a.handle(ctx, msgs) {
			for _, m := range msgs {
				_ = m.InProgress()
			}
			a.fail(ctx, err, &backoff)
		}
		if err != nil {
			// Stopped with the batch unwritten: hand it back at once, for
			// the next instance, rather than after AckWait.
			for _, m := range msgs {
				_ = m.Nak()
			}
		}
		backoff = 0
		if time.Now().After(next) {
			a.verifyAll(ctx)
			next = time.Now().Add(a.cfg.VerifyEvery)
		}
	}
	return nil
}

// fetch takes the next messages, at most Batch of them, waiting up to a
// second for the first.
func (a *Aggregator) fetch() ([]jetstream.Msg, error) {
	batch, err := a.cons.Fetch(a.cfg.Batch, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return nil, err
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && len(msgs) == 0 {
		return nil, err
	}
	return msgs, nil
}

// fail records err and pauses before the next try.
func (a *Aggregator) fail(ctx context.Context, err error, backoff *time.Duration) {
	if ctx.Err() != nil {
		return
	}
	a.mu.Lock()
	a.st.LastError = err.Error()
	a.mu.Unlock()
	// At most a third of AckWait: held messages are marked in progress
	// before each pause, and must be again before JetStream gives up on
	// them.
	*backoff = min(max(2**backoff, 100*time.Millisecond), 10*time.Second, a.cfg.AckWait/3)
	a.log.Warn("aggregating failed; retrying", "error", err, "in", *backoff)
	select {
	case <-ctx.Done():
	case <-time.After(*backoff):
	}
}

// handle writes one fetch's messages and acknowledges them.
func (a *Aggregator) handle(ctx context.Context, msgs []jetstream.Msg) error {
	if len(msgs) == 0 {
		return nil
	}
	var entries []central.Entry
	var cps []checkpoint
	var bad []central.Problem
	for _, m := range msgs {
		e, cp, p := read(m)
		if p == nil && delivered(m) > maxDeliveries {
			// A backstop: whatever keeps failing is not retried for ever.
			p = unreadable(e.Host, e.Seq, m, fmt.Errorf("delivered %d times and never stored", delivered(m)))
			if cp != nil {
				p.Host, p.Seq = cp.host, cp.size-1
			}
		}
		switch {
		case p != nil:
			bad = append(bad, *p)
		case cp != nil:
			cps = append(cps, *cp)
		default:
			entries = append(entries, e)
		}
	}
	res, err := a.write(ctx, entries)
	if err != nil {
		return err
	}
	// A chain moves only up to a signed checkpoint: verify the hosts that
	// sent one. Entries that arrive after their checkpoint (from another
	// aggregator, say) are verifyAll's, each VerifyEvery.
	var hosts []string
	for _, cp := range cps {
		if err := a.store.AddCheckpoint(ctx, cp.host, cp.note, cp.size); err != nil {
			return err
		}
		if !slices.Contains(hosts, cp.host) {
			hosts = append(hosts, cp.host)
		}
	}
	for _, p := range bad {
		if err := a.store.Raise(ctx, p); err != nil {
			return err
		}
	}
	for _, h := range hosts {
		if err := a.store.Verify(ctx, h); err != nil {
			return err
		}
	}
	for _, m := range msgs {
		_ = m.Ack()
	}
	a.mu.Lock()
	a.st.Messages += uint64(len(msgs))
	a.st.Added += uint64(res.Added)
	a.st.Duplicates += uint64(res.Duplicates)
	a.st.Checkpoints += uint64(len(cps))
	a.st.Unreadable += uint64(len(bad))
	for _, m := range msgs {
		if delivered(m) > 1 {
			a.st.Redelivered++
		}
	}
	a.st.LastError = ""
	a.mu.Unlock()
	return nil
}

// write writes entries; when the store refuses the batch's data (not its
// connection), it writes them one at a time and raises each one it still
// refuses, so that one bad entry cannot hold the stream up.
func (a *Aggregator) write(ctx context.Context, entries []central.Entry) (central.Result, error) {
	res, err := a.store.Write(ctx, entries)
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) || !dataError(pe) {
		return res, err
	}
	res = central.Result{}
	for _, e := range entries {
		r, err := a.store.Write(ctx, []central.Entry{e})
		if errors.As(err, &pe) && dataError(pe) {
			err = a.store.Raise(ctx, central.Problem{Host: e.Host, Seq: e.Seq, Kind: central.ProblemUnreadable,
				Detail: fmt.Sprintf("the store refused host %s entry %d: %v", e.Host, e.Seq, err)})
		}
		if err != nil {
			return res, err
		}
		res.Added += r.Added
		res.Duplicates += r.Duplicates
		res.Skipped += r.Skipped
		for _, h := range r.Hosts {
			if !slices.Contains(res.Hosts, h) {
				res.Hosts = append(res.Hosts, h)
			}
		}
	}
	return res, nil
}

// dataError says whether PostgreSQL refused the data itself (SQLSTATE
// class 22, data exception; 23, integrity constraint violation; 54, a
// limit such as a btree key's size), which no retry mends.
func dataError(pe *pgconn.PgError) bool {
	return len(pe.Code) == 5 && (pe.Code[:2] == "22" || pe.Code[:2] == "23" || pe.Code[:2] == "54")
}

// checkpoint is a checkpoint message's content.
type checkpoint struct {
	host string
	size uint64
	note []byte
}

// read reads one message: an entry, a checkpoint, or a problem.
func read(m jetstream.Msg) (central.Entry, *checkpoint, *central.Problem) {
	id := m.Headers().Get(jetstream.MsgIDHeader)
	nm, err := sink.ParseNATSMessage(m.Subject(), id, m.Data())
	if err != nil {
		// A subject that names no host makes a problem of the store's
		// own (host ""), which no subject can name.
		return central.Entry{}, nil, unreadable(nm.Host, nm.Seq, m, err)
	}
	if nm.Checkpoint == 0 {
		return central.Entry{Host: nm.Host, Seq: nm.Seq, Raw: m.Data()}, nil, nil
	}
	var l sink.CheckpointLine
	if err := json.Unmarshal(m.Data(), &l); err != nil || l.Checkpoint.Size != nm.Checkpoint {
		if err == nil {
			err = fmt.Errorf("it carries checkpoint %d", l.Checkpoint.Size)
		}
		return central.Entry{}, nil, unreadable(nm.Host, nm.Seq, m, err)
	}
	return central.Entry{}, &checkpoint{host: nm.Host, size: nm.Checkpoint, note: []byte(l.Checkpoint.Note)}, nil
}

// unreadableSpan is how many seqs (of a host, or of the stream for a
// subject that names none) one unreadable alert stands for.
const unreadableSpan = 10000

// maxDeliveries is how many deliveries of a message the aggregator tries
// before it gives up on it, acknowledges it and raises it as unreadable.
const maxDeliveries = 20

// delivered is how many times m was delivered, this time included.
func delivered(m jetstream.Msg) uint64 {
	md, err := m.Metadata()
	if err != nil {
		return 0
	}
	return md.NumDelivered
}

func unreadable(host string, seq uint64, m jetstream.Msg, err error) *central.Problem {
	var streamSeq uint64
	if md, mdErr := m.Metadata(); mdErr == nil {
		streamSeq = md.Sequence.Stream
	}
	if host == "" {
		seq = streamSeq // a subject that names no host: the stream's seqs
	}
	// Raised once per unreadableSpan seqs: a flood of junk costs an alert
	// per span, not one each.
	return &central.Problem{Host: host, Seq: seq, Kind: central.ProblemUnreadable, Key: int64(seq/unreadableSpan) + 1,
		Detail: fmt.Sprintf("stream message %d on %q is not one a host's sink sends: %v (the first of its span of %d seqs)", streamSeq, m.Subject(), err, unreadableSpan)}
}

// verifyAll verifies every host's chain, for the gaps that only time
// reveals.
func (a *Aggregator) verifyAll(ctx context.Context) {
	chains, err := a.store.Chains(ctx)
	if err != nil {
		a.log.Warn("reading chains", "error", err)
		return
	}
	for _, c := range chains {
		if c.Broken != "" || c.Next >= c.Received && c.StalledSince.IsZero() {
			continue
		}
		// A host without a key stays one until a restart loads keys again:
		// its unknown_host is raised once, not looked for on every pass.
		if !c.Known {
			if a.unknown[c.Host] {
				continue
			}
			a.unknown[c.Host] = true
		}
		if err := a.store.Verify(ctx, c.Host); err != nil {
			a.log.Warn("verifying", "host", c.Host, "error", err)
		}
	}
	if info, err := a.cons.Info(ctx); err == nil {
		a.mu.Lock()
		a.st.Pending = info.NumPending
		a.mu.Unlock()
	}
}
