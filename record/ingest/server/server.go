// Package server is the daemon side of the sandtrail ingest socket: it
// accepts batches of events over a unix socket (the protocol of package
// ingest), attributes every batch to a session from the kernel's view of the
// peer, drops events already journaled, appends the rest to the journal and
// acknowledges them once they are durable.
//
// Trust model. The socket file is world-writable; what a peer may do is
// decided per batch from SO_PEERCRED and the peer's v2 cgroup, never from
// anything in the message:
//
//   - A peer whose cgroup is a registered session cgroup, or a descendant of
//     one, belongs to that session. Its events get that session_id, source
//     "shim", and proc.pid/proc.uid/proc.cgroup_id from the kernel; whatever
//     it claimed there is discarded. It may send only the agent side's own
//     kinds: pkg.install, pkg.blocked, tool.invoke and model.io (see
//     senders), and mirror-only pkg fields (verified, client, cache) are
//     dropped. Every kind the host writes (pkg.fetch, pkg.filter, alert,
//     process.*, file.*, net.*, session.*, limit.*, collector.*) is rejected,
//     and the attempt is journaled in the peer's session as an alert
//     (RuleForgedKind) naming the kinds and the peer.
//   - A root peer (uid 0 at connect time) outside every session is the
//     orchestrator. It names the session itself, may send the same kinds
//     and the mirror's pkg.fetch and pkg.filter, and they get source "api".
//   - Any other peer is refused.
//
// Attribution is re-read for every batch, so a process that moves between
// cgroups is attributed where it is now. The peer's pidfd (SO_PEERPIDFD)
// ensures that a recycled pid never lends its cgroup to a connection whose
// process has exited; such a batch is answered "unavailable". Kernels
// before 6.5 lack SO_PEERPIDFD: there the server compares the process start
// time with the one it read at accept, which leaves a window (a pid
// recycled between the peer's connect and the accept goes unnoticed).
//
// Malformed, oversized and garbage frames get an error reply and are counted;
// they never stop the server. Each connection has its own goroutine, read
// deadlines and a place under the caps on connections.
//
// Connection caps. Right after accept, in the connection's goroutine and
// before any frame is read, the server attributes the peer and counts the
// connection under a peer key: the session for a peer in one (every process
// and cgroup of a session is one peer), the uid otherwise. A peer may hold
// WithMaxConnsPerPeer connections; all peers but the orchestrator (root
// outside every session) share the global cap minus a reserve of one
// eighth, which only the orchestrator may use, and the orchestrator has no
// cap of its own. A connection over a cap gets the busy reply and is
// closed; so an agent holding many connections cannot starve root's.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/kernel/cgroup"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest"
)

// DefaultDedupSize is how many journaled event ids the server remembers by
// default (about 30 MiB of memory).
const DefaultDedupSize = 1 << 18

// Appender is where accepted events go: the journal. Append returns only
// once the events are durable.
type Appender interface {
	Append(ctx context.Context, evs ...*event.Event) error
}

// Errors returned by the server.
var (
	ErrClosed = errors.New("server: closed")
	ErrInUse  = errors.New("server: socket in use")
)

// Stats are the server's counters since it started.
type Stats struct {
	Conns       int64  // connections open now
	Accepted    uint64 // connections accepted in total
	Busy        uint64 // connections turned away at a cap
	PeerBusy    uint64 // of Busy, those turned away at their peer's cap
	Batches     uint64 // requests answered
	Events      uint64 // events appended to the journal
	Duplicates  uint64 // events dropped as already journaled
	Rejected    uint64 // events refused (invalid or not permitted)
	Failed      uint64 // events not stored because the append failed
	Malformed   uint64 // frames that were not a valid request
	Oversized   uint64 // frames larger than the limit
	Refused     uint64 // batches from peers that may not send
	Unavailable uint64 // batches that could not be attributed
	Timeouts    uint64 // connections closed mid-frame by a read deadline
}

// Server serves the ingest socket.
type Server struct {
	app      Appender
	sessions Sessions
	attr     *attribution.Attributor
	log      hclog.Logger
	host     string
	cg       *cgroup.Mount // WithCgroup2's
	maxConns int
	perPeer  int
	caps     *connCaps
	maxFrame int
	idle     time.Duration
	frameTO  time.Duration
	writeTO  time.Duration
	dedup    *dedup
	checker  Checker

	mu       sync.Mutex
	closing  bool
	lns      map[net.Listener]struct{}
	conns    map[*net.UnixConn]struct{}
	wg       sync.WaitGroup
	appendCx context.Context

	conns64     atomic.Int64
	accepted    atomic.Uint64
	busy        atomic.Uint64
	peerBusy    atomic.Uint64
	batches     atomic.Uint64
	events      atomic.Uint64
	duplicates  atomic.Uint64
	rejected    atomic.Uint64
	failed      atomic.Uint64
	malformed   atomic.Uint64
	oversized   atomic.Uint64
	refused     atomic.Uint64
	unavailable atomic.Uint64
	timeouts    atomic.Uint64

	lastBusyWarn atomic.Int64 // unix nanoseconds of the last warnBusy line
}

// Option configures a Server.
type Option func(*Server)

// WithLogger sets the logger; the server logs under the name "ingest".
func WithLogger(l hclog.Logger) Option { return func(s *Server) { s.log = l.Named("ingest") } }

// WithHost sets the host written into every accepted event.
func WithHost(h string) Option { return func(s *Server) { s.host = h } }

// WithMaxConns caps concurrent connections (default 256). One eighth of
// them (at least one, when n > 1) is reserved for root outside every
// session: other peers share the rest.
func WithMaxConns(n int) Option { return func(s *Server) { s.maxConns = n } }

// WithMaxConnsPerPeer caps the connections one peer (a session, or a uid
// outside sessions) may hold open (default DefaultMaxConnsPerPeer); n <= 0
// removes the per-peer cap. Root outside every session has none.
func WithMaxConnsPerPeer(n int) Option { return func(s *Server) { s.perPeer = n } }

// WithMaxFrame lowers the largest accepted frame (default and upper bound
// ingest.MaxFrame).
func WithMaxFrame(n int) Option { return func(s *Server) { s.maxFrame = min(n, ingest.MaxFrame) } }

// WithIdleTimeout closes connections that send nothing for d (default 2m).
func WithIdleTimeout(d time.Duration) Option { return func(s *Server) { s.idle = d } }

// WithFrameTimeout bounds the time to receive a frame once its header has
// arrived (default 10s).
func WithFrameTimeout(d time.Duration) Option { return func(s *Server) { s.frameTO = d } }

// WithDedupSize sets how many journaled event ids are remembered (default
// DefaultDedupSize).
func WithDedupSize(n int) Option { return func(s *Server) { s.dedup = newDedup(max(n, 1)) } }

// WithCgroup2 overrides where the v2 hierarchy is mounted, instead of
// reading /proc/self/mountinfo.
func WithCgroup2(m cgroup.Mount) Option { return func(s *Server) { s.cg = &m } }

// WithChecker answers check requests with c; without it they are answered
// CodeUnavailable.
func WithChecker(c Checker) Option { return func(s *Server) { s.checker = c } }

// New returns a server appending to app and attributing peers through
// sessions. When the host has no cgroup v2 hierarchy the server still runs,
// but then no peer is in a session and only root may send.
func New(app Appender, sessions Sessions, opts ...Option) *Server {
	s := &Server{
		app:      app,
		sessions: sessions,
		log:      hclog.NewNullLogger(),
		maxConns: 256,
		perPeer:  DefaultMaxConnsPerPeer,
		maxFrame: ingest.MaxFrame,
		idle:     2 * time.Minute,
		frameTO:  10 * time.Second,
		writeTO:  10 * time.Second,
		lns:      make(map[net.Listener]struct{}),
		conns:    make(map[*net.UnixConn]struct{}),
		appendCx: context.Background(),
	}
	for _, o := range opts {
		o(s)
	}
	var aopts []attribution.Option
	if s.cg != nil {
		aopts = append(aopts, attribution.WithMount(*s.cg))
	}
	s.attr = attribution.New(sessions, aopts...)
	if s.dedup == nil {
		s.dedup = newDedup(DefaultDedupSize)
	}
	s.caps = newConnCaps(s.maxConns, s.perPeer)
	if err := s.attr.MountErr(); err != nil {
		s.log.Warn("no cgroup v2 hierarchy, no peer can be attributed to a session", "error", err)
	}
	return s
}

// Remember records an event id as already journaled, for example from the
// journal's tail at start-up.
func (s *Server) Remember(eventID string) {
	if eventID != "" {
		s.dedup.remember(eventID)
	}
}

// ScanFunc calls fn for every journal entry from sequence number from on,
// as journal.Scan does.
type ScanFunc func(from uint64, fn func(seq uint64, raw []byte) error) error

// RememberTail loads the event ids of the last n of size journal entries
// into the dedup set, so that a client replaying its spool after a daemon
// crash does not duplicate what was journaled but never acknowledged. It
// returns how many ids it loaded. Entries that are not JSON objects are
// skipped.
func (s *Server) RememberTail(size, n uint64, scan ScanFunc) (int, error) {
	from := uint64(0)
	if size > n {
		from = size - n
	}
	loaded := 0
	idKey := []byte(`"event_id":`)
	err := scan(from, func(_ uint64, raw []byte) error {
		// Most entries (the kernel's) have no id: skip them unparsed. An
		// entry is event.Marshal's output, whose keys have no spaces.
		if !bytes.Contains(raw, idKey) {
			return nil
		}
		var e struct {
			EventID string `json:"event_id"`
		}
		if json.Unmarshal(raw, &e) == nil && e.EventID != "" {
			s.dedup.remember(e.EventID)
			loaded++
		}
		return nil
	})
	if err != nil {
		return loaded, fmt.Errorf("loading recent event ids: %w", err)
	}
	return loaded, nil
}

// Remembered returns how many event ids the dedup set holds.
func (s *Server) Remembered() int { return s.dedup.len() }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	return Stats{
		Conns: s.conns64.Load(), Accepted: s.accepted.Load(), Busy: s.busy.Load(), PeerBusy: s.peerBusy.Load(),
		Batches: s.batches.Load(), Events: s.events.Load(), Duplicates: s.duplicates.Load(),
		Rejected: s.rejected.Load(), Failed: s.failed.Load(), Malformed: s.malformed.Load(),
		Oversized: s.oversized.Load(), Refused: s.refused.Load(), Unavailable: s.unavailable.Load(),
		Timeouts: s.timeouts.Load(),
	}
}

// Listen creates the socket at path. A missing parent directory is created
// 0755 whatever the umask. A stale socket left by a crash is replaced;
// anything else at path is an error, and so is a socket that something
// still serves (ErrInUse). The socket file gets mode, normally 0666:
// attribution, not the file mode, decides what a peer may do.
func Listen(path string, mode os.FileMode) (*net.UnixListener, error) {
	if dir := filepath.Dir(path); !exists(dir) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating socket directory: %w", err)
		}
		// Whatever the umask: peers must reach the socket.
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, fmt.Errorf("setting socket directory mode: %w", err)
		}
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("creating socket: %s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("creating socket: %w: something is serving %s", ErrInUse, path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("setting socket mode: %w", err)
	}
	return ln, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Serve accepts connections on ln until Shutdown. It returns ErrClosed after
// Shutdown, or the accept error that stopped it.
func (s *Server) Serve(ln *net.UnixListener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
	}()
	var delay time.Duration
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrClosed
			}
			var ne net.Error
			if errors.Is(err, net.ErrClosed) || errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("accepting: %w", err)
			}
			// EMFILE and friends: back off instead of spinning.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", "error", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		s.accepted.Add(1)
		if !s.track(c) {
			c.Close()
			return ErrClosed
		}
		go s.serveConn(c)
	}
}

// track registers a connection; it fails once shutdown has begun.
func (s *Server) track(c *net.UnixConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Server) untrack(c *net.UnixConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// Shutdown stops accepting, interrupts idle connections, lets batches in
// flight finish (their appends complete and their replies are written) and
// waits for every connection to close, or for ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		// Wakes a connection blocked reading; one busy with a batch
		// sees closing before it reads again.
		_ = c.SetReadDeadline(time.Unix(1, 0))
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("draining ingest connections: %w", ctx.Err())
	}
}

// armRead sets the idle read deadline unless shutdown has begun.
func (s *Server) armRead(c *net.UnixConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(s.idle))
	return true
}

func (s *Server) serveConn(c *net.UnixConn) {
	defer s.untrack(c)
	defer c.Close()
	s.conns64.Add(1)
	defer s.conns64.Add(-1)
	ap, err := s.attr.Open(c)
	if err != nil {
		s.unavailable.Add(1)
		s.log.Debug("cannot identify peer", "error", err) // counted; peers must not flood the log
		s.reply(c, &ingest.Reply{Code: ingest.CodeUnavailable, Error: "cannot identify peer"})
		return
	}
	defer ap.Close()
	p := &peer{Peer: ap}
	release := s.admitConn(c, p)
	if release == nil {
		return
	}
	defer release()
	for s.armRead(c) {
		size, err := ingest.ReadFrameHeader(c, s.maxFrame)
		switch {
		case err == nil:
		case errors.Is(err, ingest.ErrEmptyFrame):
			s.malformed.Add(1)
			s.reply(c, &ingest.Reply{Code: ingest.CodeMalformed, Error: "empty frame"})
			continue
		case errors.Is(err, ingest.ErrFrameTooLarge):
			// The body cannot be skipped safely: reply and hang up.
			s.oversized.Add(1)
			s.reply(c, &ingest.Reply{Code: ingest.CodeOversized,
				Error: fmt.Sprintf("frame of %d bytes exceeds %d", size, s.maxFrame)})
			return
		default:
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
				s.log.Debug("connection read failed", "pid", p.Pid, "error", err)
			}
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(s.frameTO))
		payload := make([]byte, size)
		if _, err := io.ReadFull(c, payload); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.timeouts.Add(1)
			} else {
				s.malformed.Add(1)
			}
			return
		}
		rep := s.handle(p, payload)
		s.batches.Add(1)
		if !s.reply(c, rep) {
			return
		}
	}
}

// reply writes rep, reporting whether the connection is still usable.
func (s *Server) reply(c *net.UnixConn, rep *ingest.Reply) bool {
	rep.V = ingest.ProtocolVersion
	b, err := json.Marshal(rep)
	if err != nil {
		s.log.Error("encoding reply", "error", err)
		return false
	}
	_ = c.SetWriteDeadline(time.Now().Add(s.writeTO))
	if err := ingest.WriteFrame(c, b); err != nil {
		s.log.Debug("writing reply failed", "error", err)
		return false
	}
	return true
}

// attribute is the one attribution step (kernel/attribution) for a batch
// of p's.
func (s *Server) attribute(p *peer) (sender, error) {
	a, err := s.attr.Attribute(p.Peer)
	return sender{pid: a.Pid, uid: a.UID, cgroupID: a.CgroupID, session: a.Session}, err
}

// handle answers one request payload.
func (s *Server) handle(p *peer, payload []byte) *ingest.Reply {
	batch, err := ingest.DecodeBatch(payload)
	if err != nil {
		s.malformed.Add(1)
		return &ingest.Reply{Code: ingest.CodeMalformed, Error: err.Error()}
	}
	a, refusal := s.admit(p)
	if refusal != nil {
		return refusal
	}
	if batch.Checks != nil {
		return s.check(a, batch.Checks)
	}
	b := &pending{results: make([]ingest.Result, batch.Len())}
	s.triage(b, batch, a)
	s.store(b)
	s.settleRepeats(b)
	// Results are positional; the id is repeated only where it helps
	// the client report a problem, to keep replies small.
	for i := range b.results {
		if b.results[i].Status.Acked() {
			b.results[i].EventID = ""
		}
	}
	return &ingest.Reply{Results: b.results}
}

// admit attributes a batch to its peer. It returns the reply that refuses
// the whole batch when the peer cannot be attributed, or is neither in a
// session nor root.
func (s *Server) admit(p *peer) (sender, *ingest.Reply) {
	a, err := s.attribute(p)
	if err != nil {
		s.unavailable.Add(1)
		if !p.warned {
			p.warned = true
			s.log.Warn("cannot attribute batch", "pid", p.Pid, "uid", p.UID, "error", err)
		}
		return a, &ingest.Reply{Code: ingest.CodeUnavailable, Error: "cannot attribute peer: " + err.Error()}
	}
	if a.session == "" && a.uid != 0 {
		s.refused.Add(1)
		if !p.warned { // once per connection: peers must not flood the log
			p.warned = true
			s.log.Warn("refused batch from peer outside every session", "pid", a.pid, "uid", a.uid, "cgroup_id", a.cgroupID)
		}
		return a, &ingest.Reply{Code: ingest.CodeRefused, Error: "peer is not in a session and not root"}
	}
	return a, nil
}

// pending is a batch on its way to the journal: the result of each of its
// events, the events to store, and the alert that records what a session's
// peer sent that it may not.
type pending struct {
	results []ingest.Result
	evs     []*event.Event
	idx     []int       // results index of each entry of evs
	ids     []string    // event ids claimed by this batch
	sameAs  map[int]int // results index → earlier index with the same id
	first   map[string]int
	alert   *event.Event // RuleForgedKind's, or nil
}

// triage rewrites the batch's events for peer a, rejecting those that are
// invalid or that the peer may not send, and claims the others (see claim).
// When a session's peer sent kinds that only the host writes, the batch
// gets the alert that records it.
func (s *Server) triage(b *pending, batch *ingest.Batch, a sender) {
	now := time.Now().UTC()
	var forged forgery
	for i, e := range batch.Events {
		err := batch.Errs[i]
		if err == nil {
			err = s.rewrite(e, batch.Sizes[i], a, now)
		}
		if err != nil {
			var ke *kindError
			if errors.As(err, &ke) && ke.from == fromSession {
				forged.add(ke.kind)
			}
			b.results[i] = ingest.Result{EventID: idOf(e), Status: ingest.StatusRejected, Error: err.Error()}
			s.rejected.Add(1)
			continue
		}
		b.results[i].EventID = e.EventID
		s.claim(b, i, e)
	}
	if forged.n > 0 {
		b.alert = s.forgedAlert(a, &forged, now)
	}
}

// claim adds e, the batch's event i, to the events to store, unless an
// earlier event of the batch has its id (its result then follows that one),
// the id is already journaled (a duplicate), or another batch is storing it
// (failed, to retry).
func (s *Server) claim(b *pending, i int, e *event.Event) {
	if j, ok := b.first[e.EventID]; ok {
		if b.sameAs == nil {
			b.sameAs = make(map[int]int)
		}
		b.sameAs[i] = j
		return
	}
	switch s.dedup.claim(e.EventID) {
	case claimSeen:
		b.results[i].Status = ingest.StatusDuplicate
		s.duplicates.Add(1)
		return
	case claimPending:
		b.results[i].Status = ingest.StatusFailed
		b.results[i].Error = "an event with this id is being stored by another batch; retry"
		s.failed.Add(1)
		return
	}
	if b.first == nil {
		b.first = make(map[string]int)
	}
	b.first[e.EventID] = i
	b.ids = append(b.ids, e.EventID)
	b.evs = append(b.evs, e)
	b.idx = append(b.idx, i)
}

// store appends the claimed events, and after them the batch's alert, to
// the journal in one call and settles their claims and results.
func (s *Server) store(b *pending) {
	evs := b.evs
	if b.alert != nil {
		evs = append(evs[:len(evs):len(evs)], b.alert)
	}
	if len(evs) == 0 {
		return
	}
	err := s.app.Append(s.appendCx, evs...)
	s.dedup.settle(b.ids, err == nil)
	for _, i := range b.idx {
		if err != nil {
			b.results[i].Status = ingest.StatusFailed
			b.results[i].Error = "storing failed"
		} else {
			b.results[i].Status = ingest.StatusOK
		}
	}
	if err != nil {
		s.failed.Add(uint64(len(b.evs)))
		s.log.Error("appending to journal", "events", len(evs), "error", err)
	} else {
		s.events.Add(uint64(len(b.evs)))
	}
}

// settleRepeats gives each repeat of an id within the batch the result of
// its first event: a duplicate where that one was stored.
func (s *Server) settleRepeats(b *pending) {
	for i, j := range b.sameAs {
		b.results[i].Status = b.results[j].Status
		if b.results[j].Status == ingest.StatusOK {
			b.results[i].Status = ingest.StatusDuplicate
			s.duplicates.Add(1)
		}
		b.results[i].Error = b.results[j].Error
	}
}

func idOf(e *event.Event) string {
	if e == nil || !ingest.ValidEventID(e.EventID) {
		return ""
	}
	return e.EventID
}

// rewrite checks that the peer may send e, then replaces everything in e
// that the server vouches for. An event of a kind the peer may not send is
// rejected with a *kindError before anything else is checked.
func (s *Server) rewrite(e *event.Event, rawLen int, a sender, now time.Time) error {
	if !a.permitted(e.Kind) {
		return &kindError{kind: e.Kind, from: a.from()}
	}
	if e.EventID == "" {
		e.EventID = ingest.NewEventID()
	} else if !ingest.ValidEventID(e.EventID) {
		return fmt.Errorf("%w: event_id: must be 1 to %d bytes of [A-Za-z0-9._:-]", event.ErrInvalid, ingest.MaxEventIDLen)
	}
	cat := e.Category()
	if a.session != "" {
		e.SessionID = a.session
		e.Source = event.SourceShim
	} else {
		e.Source = event.SourceAPI
	}
	e.Seq = 0
	e.Host = s.host
	if e.TS.IsZero() {
		e.TS = now
	}
	uid := a.uid
	e.Proc = &event.Proc{Pid: a.pid, UID: &uid, CgroupID: a.cgroupID}
	// Keep only the category's own payload: a shim cannot attach an
	// alert, a loss count or a session step to a pkg event.
	pkg, tool, model := e.Pkg, e.Tool, e.Model
	*e = event.Event{V: e.V, TS: e.TS, SessionID: e.SessionID, Host: e.Host, Kind: e.Kind,
		Source: e.Source, EventID: e.EventID, Proc: e.Proc}
	switch cat {
	case "pkg":
		if pkg != nil {
			// What the mirror alone can know.
			pkg.Verified, pkg.Client, pkg.Cache = nil, "", ""
		}
		e.Pkg = pkg
	case "tool":
		e.Tool = tool
	case "model":
		e.Model = model
	}
	if err := e.Validate(); err != nil {
		return err
	}
	// Re-encoding can grow a string up to six times ("<" becomes
	// "\u003c"), and the server adds bounded fields. Only an event that
	// could then exceed the limit pays for a trial encoding.
	if 6*rawLen+len(s.host)+4096 > event.MaxEncodedSize {
		if _, err := event.Marshal(e); err != nil {
			return err
		}
	}
	return nil
}
