// Package sink streams the record to where a SOC reads it: a Runner follows
// the journal from a durable cursor (the next seq to send) and hands each
// batch of entries, as stored (jsonl) or mapped to OCSF (record/ocsf), to a
// Sink: a rotating JSONL file, stdout, NATS JetStream, Splunk HEC, OTLP/HTTP
// logs, or syslog (RFC 5424 over TLS or TCP).
//
// Syslog is one of the network sinks: RFC 5424 over TCP or TLS (RFC
// 5425), where syslog's lack of acknowledgements makes TCP's the
// receipt, with a resend window for what a receiver acknowledged and lost.
//
// Delivery is at least once, and the seq is the dedupe key: the cursor
// moves only after a batch is written, so a restart, an outage or a slow
// receiver resumes where it stopped, and a crash between the write and the
// cursor's store sends that batch again. A Runner reads the journal's
// segments on its own and never blocks the journal: a sink that falls
// behind lags, and Status says by how much.
//
// Trust: a sink carries the record as the journal holds it; it adds
// nothing an agent could forge. The cursor file is root's, beside the
// journal.
package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandtrail/sandtrail/record/atomicfile"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/ocsf"
)

// Entry is one journal entry on its way to a sink.
type Entry struct {
	Seq uint64
	// Kind is the event's kind (a NATS sink's subject names it), TS its
	// time.
	Kind string
	TS   time.Time
	// Checkpoint, when not 0, makes the entry a signed checkpoint of the
	// journal at this size rather than an event: Line is a
	// CheckpointLine, and Seq the last entry it covers.
	Checkpoint uint64
	// Line is the entry in the sink's format, without a newline: the
	// stored event (jsonl) or its OCSF event (ocsf).
	Line []byte
}

// Sink writes batches of entries somewhere. Write returns only once the
// batch is durable there (or returns an error, and the batch is sent
// again); a Sink may be handed a batch it already wrote.
type Sink interface {
	Write(ctx context.Context, batch []Entry) error
	Close() error
}

// CheckpointLine is how a sink carries a signed checkpoint, in every
// format: {"sandtrail_checkpoint":{"size":N,"note":"..."}}. `sandtrail
// verify --against` reads them back from an export.
type CheckpointLine struct {
	Checkpoint struct {
		Size uint64 `json:"size"`
		Note string `json:"note"`
	} `json:"sandtrail_checkpoint"`
}

// The formats a Runner can hand a sink.
const (
	FormatJSONL = "jsonl"
	FormatOCSF  = "ocsf"
)

// Source is the journal a Runner follows: its size (the next seq) and a
// channel closed at its next durable append. *journal.Journal is one.
type Source interface {
	Size() uint64
	Changed() <-chan struct{}
}

// Config is one Runner's.
type Config struct {
	// Name names the sink in its cursor file, logs and Status.
	Name string
	// Format is FormatJSONL (the default) or FormatOCSF.
	Format string
	// JournalDir is the journal's directory, CursorDir where the cursor
	// file <Name>.cursor is kept.
	JournalDir, CursorDir string
	// Product names sandtrail in the OCSF events.
	Product ocsf.Product
	// Batch bounds the entries of one Write (default 512).
	Batch int
	// MaxBackoff bounds the wait between failed writes (default 30s).
	MaxBackoff time.Duration
}

// Status is a Runner's account of itself.
type Status struct {
	Name string `json:"name"`
	// Cursor is the next seq to send; Lag the entries the journal holds
	// past it.
	Cursor uint64 `json:"cursor"`
	Lag    uint64 `json:"lag"`
	// Sent counts the entries written since the Runner started, Skipped
	// the ones with no OCSF form.
	Sent    uint64 `json:"sent"`
	Skipped uint64 `json:"skipped,omitempty"`
	// LastError is the last write's error, empty once a write succeeds.
	LastError string    `json:"last_error,omitempty"`
	LastWrite time.Time `json:"last_write,omitzero"`
	// LatencyP50 and LatencyP99 are the time from an event's ts to its
	// batch's write, over the last latencyWindow entries written.
	LatencyP50 time.Duration `json:"latency_p50_ns,omitempty"`
	LatencyP99 time.Duration `json:"latency_p99_ns,omitempty"`
}

// latencyWindow is how many entries' latencies a Status reports on.
const latencyWindow = 4096

// Runner follows the journal into one Sink.
type Runner struct {
	cfg  Config
	sink Sink
	src  Source

	mu  sync.Mutex
	st  Status
	cp  uint64          // the size of the newest checkpoint sent
	lat []time.Duration // a ring of the last latencyWindow latencies
	li  int
}

// NewRunner returns a Runner of cfg into s, following src. It reads the
// cursor (0 when there is none yet); an unreadable cursor is an error, not
// a resend of everything.
func NewRunner(cfg Config, s Sink, src Source) (*Runner, error) {
	if cfg.Name == "" || strings.ContainsAny(cfg.Name, "/\x00") {
		return nil, fmt.Errorf("sink: bad name %q", cfg.Name)
	}
	switch cfg.Format {
	case "":
		cfg.Format = FormatJSONL
	case FormatJSONL, FormatOCSF:
	default:
		return nil, fmt.Errorf("sink %s: format %q: want jsonl or ocsf", cfg.Name, cfg.Format)
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 512
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	r := &Runner{cfg: cfg, sink: s, src: src, st: Status{Name: cfg.Name}}
	cur, err := r.readCursor()
	if err != nil {
		return nil, err
	}
	r.st.Cursor = cur
	return r, nil
}

func (r *Runner) cursorPath() string { return cursorPath(r.cfg.CursorDir, r.cfg.Name) }

// cursorPath is the cursor file of sink name in dir.
func cursorPath(dir, name string) string { return filepath.Join(dir, name+".cursor") }

func (r *Runner) readCursor() (uint64, error) { return StoredCursor(r.cfg.CursorDir, r.cfg.Name) }

// StoredCursor is the durable cursor of sink name kept in dir: the next
// seq it has to send, 0 when it has stored none. An unreadable cursor is
// an error, not a 0.
func StoredCursor(dir, name string) (uint64, error) {
	path := cursorPath(dir, name)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sink %s: reading cursor: %w", name, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("sink %s: cursor %s: %w", name, path, err)
	}
	return n, nil
}

// storeCursor writes the cursor atomically and durably (record/atomicfile).
func (r *Runner) storeCursor(n uint64) error {
	if err := os.MkdirAll(r.cfg.CursorDir, 0o700); err != nil {
		return fmt.Errorf("sink %s: storing cursor: %w", r.cfg.Name, err)
	}
	if err := atomicfile.WriteFile(r.cursorPath(), fmt.Appendf(nil, "%d\n", n), 0o600); err != nil {
		return fmt.Errorf("sink %s: storing cursor: %w", r.cfg.Name, err)
	}
	return nil
}

// Status returns the Runner's account, with the lag as of now.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	if size := r.src.Size(); size > st.Cursor {
		st.Lag = size - st.Cursor
	}
	if len(r.lat) > 0 {
		l := slices.Clone(r.lat)
		slices.Sort(l)
		st.LatencyP50, st.LatencyP99 = l[len(l)/2], l[len(l)*99/100]
	}
	return st
}

// noteLatency records the batch's latencies; r.mu is held.
func (r *Runner) noteLatency(batch []Entry, now time.Time) {
	for _, e := range batch {
		if e.TS.IsZero() {
			continue
		}
		d := now.Sub(e.TS)
		if len(r.lat) < latencyWindow {
			r.lat = append(r.lat, d)
			continue
		}
		r.lat[r.li] = d
		r.li = (r.li + 1) % latencyWindow
	}
}

// Run sends the journal's entries from the cursor on, as they are
// appended, until ctx is done, and returns ctx's error. A failed write is
// retried with backoff (doubling up to MaxBackoff) and recorded in Status;
// a journal that cannot be read is returned as an error.
func (r *Runner) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		ch := r.src.Changed() // taken before reading, so no append is missed
		err := r.catchUp(ctx)
		if err == nil {
			err = r.sendCheckpoint(ctx)
		}
		switch {
		case err == nil:
			backoff = 100 * time.Millisecond
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-ch:
			}
		case errors.As(err, new(*writeError)):
			r.mu.Lock()
			r.st.LastError = err.Error()
			r.mu.Unlock()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(r.retryWait(err, backoff)):
			}
			backoff = min(2*backoff, r.cfg.MaxBackoff)
		default:
			return err
		}
	}
}

// retryWait is the wait before retrying a failed write: the backoff, or
// longer when the receiver asked for longer (a sink's error with a
// RetryAfter, such as a *ReceiverError of a 429 or 503), up to MaxBackoff.
func (r *Runner) retryWait(err error, backoff time.Duration) time.Duration {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return max(backoff, min(ra.RetryAfter(), r.cfg.MaxBackoff))
	}
	return backoff
}

// Drain sends what the journal holds past the cursor and its newest
// checkpoint, once, and returns: for a stop, after Run has returned (it
// must not run beside Run).
func (r *Runner) Drain(ctx context.Context) error {
	if err := r.catchUp(ctx); err != nil {
		return err
	}
	return r.sendCheckpoint(ctx)
}

// sendCheckpoint sends the journal's newest signed checkpoint once the
// entries it covers are sent, so that what a receiver holds can be checked
// against the host's journal later (truncation, rollback). A journal with
// no checkpoint yet sends none.
func (r *Runner) sendCheckpoint(ctx context.Context) error {
	cp, err := journal.LatestCheckpointNote(r.cfg.JournalDir)
	if errors.Is(err, journal.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sink %s: %w", r.cfg.Name, err)
	}
	r.mu.Lock()
	sent, cursor := r.cp, r.st.Cursor
	r.mu.Unlock()
	if cp.Size <= sent || cp.Size > cursor || cp.Size == 0 {
		return nil
	}
	var l CheckpointLine
	l.Checkpoint.Size, l.Checkpoint.Note = cp.Size, string(cp.Text)
	line, err := json.Marshal(l)
	if err != nil {
		return err
	}
	e := Entry{Seq: cp.Size - 1, Kind: "checkpoint", Checkpoint: cp.Size, Line: line}
	if err := r.sink.Write(ctx, []Entry{e}); err != nil {
		return &writeError{fmt.Errorf("sink %s: writing checkpoint %d: %w", r.cfg.Name, cp.Size, err)}
	}
	r.mu.Lock()
	r.cp = cp.Size
	r.mu.Unlock()
	return nil
}

// writeError is a sink's failure, which Run retries.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// catchUp sends everything from the cursor on, in one scan of the
// journal, a batch at a time; the cursor moves after each batch is written.
func (r *Runner) catchUp(ctx context.Context) error {
	r.mu.Lock()
	from := r.st.Cursor
	r.mu.Unlock()
	if r.src.Size() <= from {
		return nil
	}
	var batch []Entry
	next, skipped := from, uint64(0)
	flush := func() error {
		if len(batch) > 0 {
			if err := r.sink.Write(ctx, batch); err != nil {
				return &writeError{fmt.Errorf("sink %s: writing seqs %d-%d: %w", r.cfg.Name, batch[0].Seq, batch[len(batch)-1].Seq, err)}
			}
		}
		if err := r.storeCursor(next); err != nil {
			return &writeError{err}
		}
		now := time.Now()
		r.mu.Lock()
		r.st.Cursor, r.st.Sent, r.st.Skipped = next, r.st.Sent+uint64(len(batch)), r.st.Skipped+skipped
		r.st.LastError, r.st.LastWrite = "", now
		r.noteLatency(batch, now)
		r.mu.Unlock()
		batch, skipped = batch[:0], 0
		return ctx.Err()
	}
	err := journal.Scan(r.cfg.JournalDir, from, func(seq uint64, raw []byte) error {
		if seq < from {
			return nil
		}
		line, kind, ts, ok, err := r.format(raw)
		if err != nil {
			return fmt.Errorf("sink %s: entry %d: %w", r.cfg.Name, seq, err)
		}
		next = seq + 1
		if !ok {
			skipped++
		} else {
			batch = append(batch, Entry{Seq: seq, Kind: kind, TS: ts, Line: line})
		}
		if len(batch) >= r.cfg.Batch {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	if next > from {
		return flush()
	}
	return nil
}

// format is the stored event raw in the sink's format, and its kind and
// time; false for an event with no OCSF form.
func (r *Runner) format(raw []byte) (line []byte, kind string, ts time.Time, ok bool, err error) {
	if r.cfg.Format == FormatJSONL {
		kind, ts, err := event.StoredHead(raw)
		if err != nil {
			return nil, "", time.Time{}, false, err
		}
		return append([]byte(nil), raw...), kind, ts, true, nil
	}
	e, err := event.DecodeStored(raw)
	if err != nil {
		return nil, "", time.Time{}, false, err
	}
	o, ok := ocsf.Map(e, r.cfg.Product)
	if !ok {
		return nil, e.Kind, e.TS, false, nil
	}
	b, err := json.Marshal(o)
	return b, e.Kind, e.TS, err == nil, err
}
