package ingest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// Errors returned by the client.
var (
	// ErrSpooled is wrapped when the daemon could not be reached (or did not
	// answer) and the events were written to the spool instead. They are
	// safe on disk and go out with the next Send or Replay.
	ErrSpooled = errors.New("ingest: daemon unreachable, events spooled")
	// ErrRejected is wrapped when the daemon permanently refused events.
	ErrRejected = errors.New("ingest: events rejected")
	// ErrUnavailable is wrapped when the daemon could not be reached and
	// there is no spool to fall back on.
	ErrUnavailable = errors.New("ingest: daemon unreachable")
)

// Client sends batches of events to the daemon's ingest socket. It is safe
// for concurrent use; requests on one Client go out one at a time over one
// connection, which is re-dialled after any error.
type Client struct {
	socket  string
	spool   *spool
	timeout time.Duration

	mu   sync.Mutex
	conn net.Conn
}

// ClientOption configures a Client.
type ClientOption func(*Client) error

// WithSpool makes the client write batches it could not deliver to dir (one
// file per batch, 0600, fsynced) and send them later. dir is created 0700 if
// missing. maxFiles bounds the spool; 0 means DefaultSpoolFiles.
func WithSpool(dir string, maxFiles int) ClientOption {
	return func(c *Client) error {
		s, err := openSpool(dir, maxFiles)
		if err != nil {
			return err
		}
		c.spool = s
		return nil
	}
}

// WithTimeout bounds each request (dial, write and wait for the reply) when
// the context has no earlier deadline. The default is 10 seconds.
func WithTimeout(d time.Duration) ClientOption {
	return func(c *Client) error {
		if d <= 0 {
			return fmt.Errorf("ingest: timeout %v must be positive", d)
		}
		c.timeout = d
		return nil
	}
}

// Dial returns a client for the daemon's socket. It does not connect: an
// unreachable daemon is not an error here, since Send spools. It fails only
// when an option does (an unusable spool directory).
func Dial(socket string, opts ...ClientOption) (*Client, error) {
	if socket == "" {
		return nil, errors.New("ingest: empty socket path")
	}
	c := &Client{socket: socket, timeout: 10 * time.Second}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Close closes the connection. Spooled events stay on disk.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropConn()
}

func (c *Client) dropConn() error {
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}

// NewEventID returns a random event id (128 bits, hex).
func NewEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails on Linux
	return hex.EncodeToString(b[:])
}

// Send delivers evs and waits until the daemon has made them durable. Events
// with an empty EventID get a random one first (the caller's structs are
// updated), so a batch re-sent after an unclear failure is deduplicated.
//
// Send first replays the spool, if any. When the daemon cannot be reached or
// does not answer in time, the events are spooled and the error wraps
// ErrSpooled (or ErrUnavailable without a spool). Events the daemon refuses
// for good are not spooled; the error wraps ErrRejected and names them.
func (c *Client) Send(ctx context.Context, evs ...*event.Event) error {
	if len(evs) == 0 {
		return nil
	}
	for _, e := range evs {
		if e.EventID == "" {
			e.EventID = NewEventID()
		}
		if e.V == 0 {
			e.V = event.SchemaVersion
		}
		if e.TS.IsZero() {
			e.TS = time.Now().UTC()
		}
	}
	payloads, counts, err := chunk(evs)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.spool != nil {
		// Best effort: a failure here means the daemon is down, which
		// the sends below find out for themselves.
		_ = c.replayLocked(ctx)
	}
	var rejected []string
	for i, p := range payloads {
		rep, err := c.roundTrip(ctx, p)
		if err != nil {
			return errors.Join(c.fallback(payloads[i:], err), rejectedError(rejected))
		}
		failed, rej, err := outcome(p, counts[i], rep)
		if err != nil {
			return errors.Join(err, rejectedError(rejected))
		}
		rejected = append(rejected, rej...)
		if failed != nil {
			return errors.Join(c.fallback(append([][]byte{failed}, payloads[i+1:]...),
				errors.New("daemon could not store every event")), rejectedError(rejected))
		}
	}
	return rejectedError(rejected)
}

// rejectedError describes rejected events (the first few of them), or is nil.
func rejectedError(rejected []string) error {
	const show = 5
	switch {
	case len(rejected) == 0:
		return nil
	case len(rejected) > show:
		return fmt.Errorf("%w: %d events, the first: %s", ErrRejected, len(rejected), strings.Join(rejected[:show], "; "))
	default:
		return fmt.Errorf("%w: %s", ErrRejected, strings.Join(rejected, "; "))
	}
}

// fallback spools the payloads that were not delivered.
func (c *Client) fallback(payloads [][]byte, cause error) error {
	if c.spool == nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, cause)
	}
	for _, p := range payloads {
		if err := c.spool.put(p); err != nil {
			return fmt.Errorf("spooling after %v: %w", cause, err)
		}
	}
	return fmt.Errorf("%w: %v", ErrSpooled, cause)
}

// outcome interprets a reply to payload, which holds n events (-1 when
// unknown). It returns a payload holding the
// events that failed transiently (nil if none), descriptions of the events
// rejected for good, and an error when the whole batch was refused for good.
func outcome(payload []byte, n int, rep *Reply) (failed []byte, rejected []string, err error) {
	if rep.Code != "" {
		if rep.Code.Transient() {
			return payload, nil, nil
		}
		return nil, nil, fmt.Errorf("%w: %s: %s", ErrRejected, rep.Code, rep.Error)
	}
	if n == len(rep.Results) {
		all := true
		for _, r := range rep.Results {
			all = all && r.Status.Acked()
		}
		if all { // the common case, without decoding our own request
			return nil, nil, nil
		}
	}
	req, err := DecodeRequest(payload)
	if err != nil {
		return nil, nil, fmt.Errorf("re-reading own request: %w", err)
	}
	if len(rep.Results) != len(req.Events) {
		// A reply we cannot match is treated as no reply: try again
		// later; dedup makes that safe.
		return payload, nil, nil
	}
	var again []json.RawMessage
	for i, r := range rep.Results {
		switch {
		case r.Status.Acked():
		case r.Status == StatusRejected:
			rejected = append(rejected, fmt.Sprintf("event %s: %s", r.EventID, r.Error))
		default:
			again = append(again, req.Events[i])
		}
	}
	if len(again) > 0 {
		failed = encodeRequest(again)
	}
	return failed, rejected, nil
}

// Replay sends every spooled batch, oldest first, deleting each once the
// daemon has acknowledged it (or refused it for good). It stops at the first
// batch the daemon cannot take and returns that error. Without a spool it
// does nothing.
func (c *Client) Replay(ctx context.Context) error {
	if c.spool == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replayLocked(ctx)
}

func (c *Client) replayLocked(ctx context.Context) error {
	names, err := c.spool.list()
	if err != nil {
		return err
	}
	for _, name := range names {
		p, err := c.spool.read(name)
		if err != nil {
			return err
		}
		if p == nil { // replayed by someone else meanwhile
			continue
		}
		rep, err := c.roundTrip(ctx, p)
		if err != nil {
			return fmt.Errorf("replaying %s: %w", name, err)
		}
		failed, _, err := outcome(p, -1, rep)
		if err != nil && !errors.Is(err, ErrRejected) {
			return fmt.Errorf("replaying %s: %w", name, err)
		}
		// Rejected for good: keeping it would block the spool forever.
		if failed != nil {
			if err := c.spool.replace(name, failed); err != nil {
				return err
			}
			return fmt.Errorf("replaying %s: daemon could not store every event", name)
		}
		if err := c.spool.remove(name); err != nil {
			return err
		}
	}
	return nil
}

// Spooled returns how many batches wait in the spool.
func (c *Client) Spooled() (int, error) {
	if c.spool == nil {
		return 0, nil
	}
	names, err := c.spool.list()
	return len(names), err
}

// roundTrip sends one request payload and reads its reply. Any error drops
// the connection.
func (c *Client) roundTrip(ctx context.Context, payload []byte) (*Reply, error) {
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if c.conn == nil {
		d := net.Dialer{Deadline: deadline}
		conn, err := d.DialContext(ctx, "unix", c.socket)
		if err != nil {
			return nil, fmt.Errorf("dialing %s: %w", c.socket, err)
		}
		c.conn = conn
	}
	rep, err := c.exchange(ctx, deadline, payload)
	if err != nil {
		_ = c.dropConn()
		return nil, err
	}
	switch rep.Code {
	case CodeOversized, CodeBusy:
		_ = c.dropConn() // the server closes these
	case CodeUnavailable:
		// The connection may be inherited from a process that has
		// exited; a new one carries this process's credentials.
		_ = c.dropConn()
	}
	return rep, nil
}

func (c *Client) exchange(ctx context.Context, deadline time.Time, payload []byte) (*Reply, error) {
	conn := c.conn
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("setting deadline: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := WriteFrame(conn, payload); err != nil {
		return nil, err
	}
	b, err := ReadFrame(conn, MaxFrame)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting for reply: %w", ctx.Err())
		}
		return nil, fmt.Errorf("waiting for reply: %w", err)
	}
	return DecodeReply(b)
}

// chunk encodes events into request payloads that respect MaxBatch and
// MaxFrame, and says how many events each holds.
func chunk(evs []*event.Event) ([][]byte, []int, error) {
	var out [][]byte
	var counts []int
	var cur []json.RawMessage
	size := 0
	const overhead = requestOverhead
	flush := func() error {
		if len(cur) == 0 {
			return nil
		}
		out = append(out, encodeRequest(cur))
		counts = append(counts, len(cur))
		cur, size = nil, 0
		return nil
	}
	for _, e := range evs {
		b, err := event.Marshal(e)
		if err != nil {
			return nil, nil, err
		}
		if len(b)+overhead > MaxFrame {
			return nil, nil, fmt.Errorf("%w: one event is %d bytes", ErrFrameTooLarge, len(b))
		}
		if len(cur) == MaxBatch || size+len(b)+1+overhead > MaxFrame {
			if err := flush(); err != nil {
				return nil, nil, err
			}
		}
		cur = append(cur, b)
		size += len(b) + 1
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	return out, counts, nil
}

// Check asks the daemon's policy about checks, before a package manager
// runs, and returns one verdict per check, in order. The daemon records
// each block as a pkg.blocked event in the caller's session before it
// answers. Nothing is spooled: a daemon that cannot be reached is an error
// wrapping ErrUnavailable, and the caller decides whether to go on
// unchecked.
func (c *Client) Check(ctx context.Context, checks []Check) ([]Verdict, error) {
	if len(checks) == 0 {
		return nil, nil
	}
	if len(checks) > MaxChecks {
		return nil, fmt.Errorf("ingest: %d checks exceeds %d", len(checks), MaxChecks)
	}
	payload, err := json.Marshal(Request{V: ProtocolVersion, Checks: checks})
	if err != nil {
		return nil, fmt.Errorf("encoding checks: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rep, err := c.roundTrip(ctx, payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if rep.Code != "" {
		if rep.Code.Transient() {
			return nil, fmt.Errorf("%w: %s: %s", ErrUnavailable, rep.Code, rep.Error)
		}
		return nil, fmt.Errorf("ingest: checks refused: %s: %s", rep.Code, rep.Error)
	}
	if len(rep.Verdicts) != len(checks) {
		return nil, fmt.Errorf("ingest: %d verdicts for %d checks", len(rep.Verdicts), len(checks))
	}
	return rep.Verdicts, nil
}
