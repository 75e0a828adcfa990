// Package dnsproxy is the collector's per-host DNS proxy.
//
// A Proxy answers DNS queries over UDP and TCP by forwarding them,
// unchanged, to upstream resolvers (by default the nameservers of
// /etc/resolv.conf), and returns the upstream answer unchanged. Each query
// becomes exactly one "net.dns" event, built in toEvent, with the query name
// and type, the response code and the answers with their TTLs. A name the
// policy blocks is answered NXDOMAIN without asking upstream, and its event
// has verdict "blocked". The A and AAAA answers fill a bounded IP→domain map
// with TTL expiry (DomainOf) and are passed to an answer hook
// (WithAnswerHook), so that the collector's egress map and net.connect
// events can name the domain.
//
// One proxy serves every session of a host. Each session gets its own
// listeners (AddSession: UDP and TCP on one port of 127.0.0.1, and of ::1
// when the host has IPv6 loopback), and every query that arrives on them is
// that session's: attribution comes from the socket, never from the packet.
// With WithCgroup the proxy also asks the kernel (sock_diag) which cgroup
// the sending socket belongs to, and refuses queries sent to a session's
// listener from anywhere else.
// The optional shared listener (Listen, Serve) attributes queries by their
// source address instead (WithSession).
//
// Trust model: the proxy runs as root on the host, outside the sandbox, as
// part of the collector. The collector's BPF programs redirect every port-53
// packet of a session cgroup to that session's listeners (RedirectDNS), so
// the session of a query is decided by the kernel. Its events therefore
// carry source "kernel" and are trusted like the collector's own.
// Everything in a query or an upstream answer is untrusted bytes: malformed
// queries are answered FORMERR or dropped, and counted, and never crash the
// proxy.
//
// The emit callback is called once per query after the answer was written,
// from the goroutine serving that query. It must never block: pass a
// non-blocking emit such as record/queue's (*Queue).Emit, which drops and
// counts when its consumer is slow. A blocking emit is a bug of the caller;
// it does not delay answers, but it holds one goroutine per query.
package dnsproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	mdns "github.com/miekg/dns"

	"github.com/sandtrail/sandtrail/kernel/peercred"
	"github.com/sandtrail/sandtrail/record/event"
)

// Errors returned by New, Listen, Serve, AddSession and RemoveSession.
var (
	// ErrNoUpstream means no upstream resolver was given or found in the
	// resolver configuration.
	ErrNoUpstream = errors.New("dns: no upstream resolver")
	// ErrListening means Listen was called on a proxy that already listens.
	ErrListening = errors.New("dns: already listening")
	// ErrNotListening means Serve was called before Listen.
	ErrNotListening = errors.New("dns: not listening")
	// ErrClosed means the proxy was closed.
	ErrClosed = errors.New("dns: proxy closed")
	// ErrSessionExists means AddSession was called twice for a session.
	ErrSessionExists = errors.New("dns: session already has listeners")
	// ErrUnknownSession means RemoveSession was called for a session
	// without listeners.
	ErrUnknownSession = errors.New("dns: session has no listeners")
	// ErrTooManySessions means WithMaxSessions sessions already have
	// listeners.
	ErrTooManySessions = errors.New("dns: too many sessions")
)

// Defaults.
const (
	// DefaultTimeout bounds one upstream exchange.
	DefaultTimeout = 5 * time.Second
	// DefaultMaxDomains bounds the IP→domain map.
	DefaultMaxDomains = 1 << 16
	// DefaultResolvConf is read when New gets no upstream.
	DefaultResolvConf = "/etc/resolv.conf"
	// DefaultMaxInflight bounds the queries waiting for an upstream.
	DefaultMaxInflight = 1024
	// DefaultMaxSessions bounds the sessions with their own listeners.
	DefaultMaxSessions = 1024
	// MinDomainTTL is the least time an answered address stays in the
	// IP→domain map, so that an answer with TTL 0 (which the client uses
	// once, at once) still names the connection the client makes with it
	// when the collector decodes that connection a moment later.
	MinDomainTTL = 10 * time.Second
)

// Policy decides whether a name may be resolved. name is the query name in
// lower case without the trailing dot ("registry.npmjs.org"). reason is
// recorded with a blocked query.
type Policy func(name string) (blocked bool, reason string)

// SessionFunc attributes a query to a session by its client's address. It
// is used only for queries on the shared listener (Listen); queries on a
// session's own listeners (AddSession) belong to that session.
type SessionFunc func(src netip.AddrPort) (sessionID string, ok bool)

// SenderFunc names the process that sent a query from the cookie of its
// socket (which the proxy finds with sock_diag): the pid, uid and comm the
// kernel recorded for the socket. ok is false when it has no record. It
// must not block.
type SenderFunc func(cookie uint64) (p event.Proc, ok bool)

// AnswerHook receives each address of an allowed answer: the name the
// client asked for, an A or AAAA record's address and its TTL.
type AnswerHook func(domain string, ip netip.Addr, ttl time.Duration)

// Option configures a Proxy.
type Option func(*Proxy)

// WithLogger sets the logger; the proxy logs under the name "dns".
func WithLogger(l hclog.Logger) Option { return func(p *Proxy) { p.log = l } }

// WithEmit sets the function that receives one net.dns event per query. It
// must never block (see the package documentation).
func WithEmit(emit func(*event.Event)) Option { return func(p *Proxy) { p.emit = emit } }

// WithPolicy sets the function that decides which names are blocked. By
// default nothing is blocked.
func WithPolicy(policy Policy) Option { return func(p *Proxy) { p.policy = policy } }

// WithSession sets the function that attributes a query on the shared
// listener to a session. By default such events carry no session id.
func WithSession(session SessionFunc) Option { return func(p *Proxy) { p.session = session } }

// WithAnswerHook sets a function called for each A and AAAA record of an
// allowed NOERROR answer, with the name the client asked for (as in
// DomainOf), the address and the record's TTL. It is called before the
// answer is written to the client, so that whatever it feeds (the
// collector's egress map) knows the address before the client can connect
// to it. It must be quick and must not block.
func WithAnswerHook(hook AnswerHook) Option { return func(p *Proxy) { p.answerHook = hook } }

// WithSender has each query's event name the process that sent it
// (event.Proc): for each query the proxy asks the kernel (sock_diag) for
// the sending socket's cookie and sender for the socket's process. A query
// whose socket or process is not found is recorded without one.
func WithSender(sender SenderFunc) Option { return func(p *Proxy) { p.sender = sender } }

// WithTimeout bounds each upstream exchange; after it the next upstream is
// tried, and when all failed the client gets SERVFAIL. Non-positive values
// are ignored.
func WithTimeout(d time.Duration) Option {
	return func(p *Proxy) {
		if d > 0 {
			p.timeout = d
		}
	}
}

// WithClock sets the clock used for event times and TTL expiry.
func WithClock(now func() time.Time) Option { return func(p *Proxy) { p.now = now } }

// WithMaxDomains bounds the number of addresses in the IP→domain map; the
// least recently answered address is evicted first. Non-positive values are
// ignored.
func WithMaxDomains(n int) Option {
	return func(p *Proxy) {
		if n > 0 {
			p.maxDomains = n
		}
	}
}

// WithMaxInflight bounds the number of queries waiting for an upstream at
// once. A query beyond the bound is answered SERVFAIL at once, without asking
// upstream, and counted in Stats().Shed; it still makes its event. This keeps
// a flood of queries to a slow upstream from holding unbounded goroutines.
// Non-positive values are ignored.
func WithMaxInflight(n int) Option {
	return func(p *Proxy) {
		if n > 0 {
			p.maxInflight = n
		}
	}
}

// WithMaxSessions bounds the number of sessions with their own listeners
// (AddSession); beyond it AddSession returns ErrTooManySessions.
// Non-positive values are ignored.
func WithMaxSessions(n int) Option {
	return func(p *Proxy) {
		if n > 0 {
			p.maxSessions = n
		}
	}
}

// WithResolvConf sets the resolver configuration file read when New gets no
// upstream (DefaultResolvConf by default).
func WithResolvConf(path string) Option { return func(p *Proxy) { p.resolvConf = path } }

// WithAllowNoUpstream lets New succeed with an empty upstream list, without
// reading the resolver configuration: the proxy then answers every query
// it does not block with SERVFAIL (counted in Stats().UpstreamFailures), and
// still records it. A host whose resolver configuration is missing or
// unusable thereby keeps recording lookups instead of failing.
func WithAllowNoUpstream() Option { return func(p *Proxy) { p.allowNoUpstream = true } }

// WithHost sets the host name written into events.
func WithHost(host string) Option { return func(p *Proxy) { p.host = host } }

// Stats counts what the proxy did since it was created.
type Stats struct {
	// Queries counts queries answered by the handler (one event each).
	Queries uint64
	// Blocked counts queries the policy blocked.
	Blocked uint64
	// UpstreamFailures counts queries answered SERVFAIL because no upstream
	// answered.
	UpstreamFailures uint64
	// Shed counts queries answered SERVFAIL without asking upstream because
	// WithMaxInflight queries were already waiting.
	Shed uint64
	// Malformed counts packets that could not be parsed or that were
	// rejected (answered FORMERR or NOTIMP, or dropped); they make no event.
	Malformed uint64
	// Foreign counts queries refused because they came to a session's
	// listener from a socket of another cgroup (WithCgroup).
	Foreign uint64
	// Unverified counts queries refused because the socket that sent them
	// could not be found or checked (WithCgroup).
	Unverified uint64
	// Sessions is the number of sessions that have their own listeners now.
	Sessions int
}

// Proxy is a DNS forwarding proxy that records every query.
type Proxy struct {
	upstream        []string
	log             hclog.Logger
	emit            func(*event.Event)
	policy          Policy
	session         SessionFunc
	answerHook      AnswerHook
	timeout         time.Duration
	now             func() time.Time
	maxDomains      int
	maxInflight     int
	maxSessions     int
	resolvConf      string
	allowNoUpstream bool
	inflight        chan struct{} // one token per query waiting for an upstream
	pool            *tcpPool      // idle TCP connections to the upstreams
	sockOf          func(proto string, client, server netip.AddrPort) (peercred.Socket, error)
	sender          SenderFunc
	host            string

	domains *domainMap

	queries, blocked, upstreamFailures, shed, malformed, foreign, unverified atomic.Uint64

	// base ends with Close; upstream waits are bounded by it.
	base   context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	main     *pair // the shared listener (Listen, Serve)
	serving  bool
	closed   bool
	ready    chan struct{}              // closed once Serve started its servers or failed to
	sessions map[string]*sessionServers // nil value: being added
}

// sessionServers are the listeners of one session: IPv4, and IPv6 when the
// host has IPv6 loopback.
type sessionServers struct {
	v4, v6 *pair
	cgroup uint64 // the session's cgroup v2 id (WithCgroup), or 0
}

// SessionOption configures one session's listeners (AddSession).
type SessionOption func(*sessionConfig)

type sessionConfig struct{ cgroup uint64 }

// WithCgroup makes the session's listeners answer only queries sent from
// sockets of the cgroup v2 with this id, the session's: for each query the
// proxy asks the kernel (sock_diag) which socket sent it and in which
// cgroup that socket was created. The BPF redirect sends the session's
// port-53 traffic to its listeners, but nothing stops a process from
// sending to another session's listener port directly; this check does. A
// query from a socket of another cgroup is answered REFUSED and recorded
// with verdict blocked, attributed to the session that owns that cgroup
// (when the proxy knows it; Stats().Foreign). A query whose socket cannot
// be found (closed at once after sending) or checked is refused too and
// recorded without a session (Stats().Unverified): fail closed. Check
// CheckSocketLookup before relying on it.
func WithCgroup(id uint64) SessionOption { return func(c *sessionConfig) { c.cgroup = id } }

// CheckSocketLookup reports whether this host lets the proxy find the
// socket that sent a query (sock_diag for UDP and TCP with the socket's
// cgroup id, Linux 5.7 and later), which WithCgroup needs. It returns
// the reason when not.
func CheckSocketLookup() error {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("checking socket lookup: %w", err)
	}
	defer pc.Close()
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		return fmt.Errorf("checking socket lookup: %w", err)
	}
	defer c.Close()
	if _, err := peercred.SocketCgroup("udp", addrPort(c.LocalAddr()), addrPort(pc.LocalAddr())); err != nil {
		return fmt.Errorf("checking socket lookup over udp: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("checking socket lookup: %w", err)
	}
	defer ln.Close()
	tc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return fmt.Errorf("checking socket lookup: %w", err)
	}
	defer tc.Close()
	if _, err := peercred.SocketCgroup("tcp", addrPort(tc.LocalAddr()), addrPort(ln.Addr())); err != nil {
		return fmt.Errorf("checking socket lookup over tcp: %w", err)
	}
	return nil
}

// New returns a Proxy forwarding to upstream, a list of resolver addresses
// ("192.0.2.1", "192.0.2.1:53", "[2001:db8::1]:5353"; port 53 when none is
// given). With no upstream it reads the nameservers of /etc/resolv.conf (see
// WithResolvConf), unless WithAllowNoUpstream is given. It returns
// ErrNoUpstream when there is none, and an error for an address that is not
// an IP address with an optional port.
func New(upstream []string, opts ...Option) (*Proxy, error) {
	p := &Proxy{
		log:         hclog.NewNullLogger(),
		emit:        func(*event.Event) {},
		policy:      func(string) (bool, string) { return false, "" },
		session:     func(netip.AddrPort) (string, bool) { return "", false },
		answerHook:  func(string, netip.Addr, time.Duration) {},
		timeout:     DefaultTimeout,
		now:         time.Now,
		maxDomains:  DefaultMaxDomains,
		maxInflight: DefaultMaxInflight,
		maxSessions: DefaultMaxSessions,
		resolvConf:  DefaultResolvConf,
		sessions:    make(map[string]*sessionServers),
		sockOf:      peercred.SocketOf,
	}
	for _, o := range opts {
		o(p)
	}
	p.log = p.log.Named("dns")
	if len(upstream) == 0 && !p.allowNoUpstream {
		servers, err := ResolvConf(p.resolvConf)
		if err != nil {
			return nil, err
		}
		upstream = servers
	}
	for _, u := range upstream {
		a, err := parseUpstream(u)
		if err != nil {
			return nil, err
		}
		p.upstream = append(p.upstream, a)
	}
	if len(p.upstream) == 0 && !p.allowNoUpstream {
		return nil, ErrNoUpstream
	}
	p.domains = newDomainMap(p.maxDomains)
	p.inflight = make(chan struct{}, p.maxInflight)
	p.pool = newTCPPool()
	p.base, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// ResolvConf returns the nameservers of the resolver configuration file at
// path as ip:port, in order. It returns ErrNoUpstream when the file names
// none, and an error when it cannot be read or names something that is not
// an IP address.
func ResolvConf(path string) ([]string, error) {
	cfg, err := mdns.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading resolver configuration: %w", err)
	}
	var out []string
	for _, s := range cfg.Servers {
		a, err := parseUpstream(net.JoinHostPort(s, cfg.Port))
		if err != nil {
			return nil, fmt.Errorf("reading resolver configuration %s: %w", path, err)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("reading resolver configuration %s: %w", path, ErrNoUpstream)
	}
	return out, nil
}

// parseUpstream normalizes an upstream address to ip:port.
func parseUpstream(s string) (string, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return "", fmt.Errorf("parsing upstream %q: port 0", s)
		}
		return ap.String(), nil
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return "", fmt.Errorf("parsing upstream %q: not an IP address with optional port", s)
	}
	return netip.AddrPortFrom(a, 53).String(), nil
}

// Upstream returns the upstream resolvers, as ip:port, in the order they are
// tried.
func (p *Proxy) Upstream() []string { return append([]string(nil), p.upstream...) }

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	n := 0
	for _, s := range p.sessions {
		if s != nil {
			n++
		}
	}
	p.mu.Unlock()
	return Stats{
		Queries:          p.queries.Load(),
		Blocked:          p.blocked.Load(),
		UpstreamFailures: p.upstreamFailures.Load(),
		Shed:             p.shed.Load(),
		Malformed:        p.malformed.Load(),
		Foreign:          p.foreign.Load(),
		Unverified:       p.unverified.Load(),
		Sessions:         n,
	}
}

// Addr returns the address of the shared listener (UDP and TCP share the
// port), or the zero AddrPort before Listen.
func (p *Proxy) Addr() netip.AddrPort {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.main == nil {
		return netip.AddrPort{}
	}
	return p.main.addr
}

// ListenAndServe listens on addr ("127.0.0.1:53"; port 0 picks a free port
// for both UDP and TCP) and serves until ctx is done or Close is called. It
// returns nil after a Close or the end of ctx.
func (p *Proxy) ListenAndServe(ctx context.Context, addr string) error {
	if err := p.Listen(addr); err != nil {
		return err
	}
	return p.Serve(ctx)
}

// Listen binds the shared listener's UDP and TCP sockets on addr without
// serving yet, so that Addr is known before Serve runs. Queries on it are
// attributed to sessions by WithSession.
func (p *Proxy) Listen(addr string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.main != nil {
		return ErrListening
	}
	l, err := listenPair(addr)
	if err != nil {
		return err
	}
	p.main = l
	return nil
}

// Serve serves the shared listener bound by Listen until ctx is done or
// Close is called, and then closes the proxy.
func (p *Proxy) Serve(ctx context.Context) error {
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return ErrClosed
	case p.main == nil:
		p.mu.Unlock()
		return ErrNotListening
	case p.serving:
		p.mu.Unlock()
		return ErrListening
	}
	p.serving = true
	l, ready := p.main, make(chan struct{})
	p.ready = ready
	p.mu.Unlock()

	// Close waits for ready, so that it never races a server that has not
	// started yet (its shutdown would fail, and the server would run on).
	err := l.start(p, p)
	close(ready)
	if err == nil {
		select {
		case <-ctx.Done():
		case <-p.base.Done():
		case err = <-l.stopped():
		}
	}
	// A server that returns after the caller's Close or the end of ctx was
	// shut down; only a server that stopped on its own is an error.
	p.mu.Lock()
	stopped := p.closed || ctx.Err() != nil
	p.mu.Unlock()
	p.Close()
	if err != nil && !stopped {
		return fmt.Errorf("serving dns: %w", err)
	}
	return nil
}

// AddSession binds listeners that belong to session id: UDP and TCP on one
// port of 127.0.0.1, and, when the host has IPv6 loopback, UDP and TCP on
// one port of ::1 (v6 is the zero AddrPort otherwise). Every query that
// arrives on them is that session's, whatever its source address; the
// caller redirects the session's port-53 traffic to them. The listeners
// share the proxy's upstreams, policy, IP→domain map and counters. With
// WithCgroup, only queries from sockets of the session's cgroup are
// answered (see WithCgroup). It returns ErrSessionExists, ErrTooManySessions (see WithMaxSessions),
// ErrClosed, or an error binding the sockets.
func (p *Proxy) AddSession(id string, opts ...SessionOption) (v4, v6 netip.AddrPort, err error) {
	var sc sessionConfig
	for _, o := range opts {
		o(&sc)
	}
	if id == "" {
		return v4, v6, errors.New("dns: empty session id")
	}
	p.mu.Lock()
	switch _, exists := p.sessions[id]; {
	case p.closed:
		p.mu.Unlock()
		return v4, v6, ErrClosed
	case exists:
		p.mu.Unlock()
		return v4, v6, fmt.Errorf("%w: %s", ErrSessionExists, id)
	case len(p.sessions) >= p.maxSessions:
		p.mu.Unlock()
		return v4, v6, fmt.Errorf("%w: %d have listeners", ErrTooManySessions, len(p.sessions))
	}
	p.sessions[id] = nil // reserved while binding
	p.mu.Unlock()

	s, err := p.bindSession(id, sc.cgroup)
	p.mu.Lock()
	if err == nil && p.closed {
		err = ErrClosed
	}
	if err != nil {
		delete(p.sessions, id)
		p.mu.Unlock()
		if s != nil {
			_ = s.stop()
		}
		return netip.AddrPort{}, netip.AddrPort{}, err
	}
	p.sessions[id] = s
	p.mu.Unlock()
	v4 = s.v4.addr
	if s.v6 != nil {
		v6 = s.v6.addr
	}
	return v4, v6, nil
}

// bindSession binds and starts a session's listeners. On error it returns
// what it started, for the caller to stop.
func (p *Proxy) bindSession(id string, cgroup uint64) (*sessionServers, error) {
	h := sessionHandler{p: p, id: id, cgroup: cgroup}
	s := &sessionServers{cgroup: cgroup}
	var err error
	if s.v4, err = listenPair("127.0.0.1:0"); err != nil {
		return nil, err
	}
	if err := s.v4.start(p, h); err != nil {
		return s, fmt.Errorf("serving dns for session %s: %w", id, err)
	}
	v6, err := listenPair("[::1]:0")
	switch {
	case err == nil:
		s.v6 = v6
		if err := s.v6.start(p, h); err != nil {
			return s, fmt.Errorf("serving dns for session %s: %w", id, err)
		}
	case noIPv6(err):
		// No IPv6 loopback on this host: IPv4 only.
	default:
		return s, err
	}
	return s, nil
}

// noIPv6 reports whether err says the host cannot bind an IPv6 loopback
// address.
func noIPv6(err error) bool {
	return errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EAFNOSUPPORT) ||
		errors.Is(err, syscall.EPROTONOSUPPORT)
}

// RemoveSession closes the listeners of session id. Queries already being
// answered finish and make their events. It returns ErrUnknownSession when
// the session has no listeners.
func (p *Proxy) RemoveSession(id string) error {
	p.mu.Lock()
	s := p.sessions[id]
	if s == nil {
		p.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrUnknownSession, id)
	}
	delete(p.sessions, id)
	p.mu.Unlock()
	if err := s.stop(); err != nil {
		return fmt.Errorf("closing dns listeners of session %s: %w", id, err)
	}
	return nil
}

func (s *sessionServers) stop() error {
	var errs []error
	for _, l := range []*pair{s.v4, s.v6} {
		if l != nil {
			errs = append(errs, l.stop())
		}
	}
	return errors.Join(errs...)
}

// sessionHandler answers the queries on one session's listeners.
type sessionHandler struct {
	p      *Proxy
	id     string
	cgroup uint64 // queries must come from this cgroup, when not 0
}

func (h sessionHandler) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) {
	h.p.serve(w, req, h.id, true, h.cgroup)
}

// sessionOfCgroup returns the session whose listeners have cgroup id cg.
func (p *Proxy) sessionOfCgroup(cg uint64) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, s := range p.sessions {
		if s != nil && s.cgroup == cg {
			return id
		}
	}
	return ""
}

// Close stops serving, closes every listener and ends the upstream waits
// in progress. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	main, ready := p.main, p.ready
	var sessions []*sessionServers
	for id, s := range p.sessions {
		if s != nil {
			sessions = append(sessions, s)
			delete(p.sessions, id)
		}
	}
	p.mu.Unlock()
	p.cancel()
	p.pool.close()
	if ready != nil {
		<-ready
	}
	var errs []error
	if main != nil {
		errs = append(errs, main.stop())
	}
	for _, s := range sessions {
		errs = append(errs, s.stop())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing dns proxy: %w", err)
	}
	return nil
}

// pair is a UDP and a TCP socket bound to the same address and port, each
// served by its own miekg/dns server once started.
type pair struct {
	pc      net.PacketConn
	ln      net.Listener
	addr    netip.AddrPort
	servers []*server
	wait    time.Duration // how long stop waits for queries being answered
	stopMu  sync.Mutex
	done    bool
}

// server is one miekg/dns server of a pair and the result of its serve
// loop.
type server struct {
	proto   string
	s       *mdns.Server
	started bool       // its serve loop ran
	result  chan error // ActivateAndServe's result, once
}

// listenPair binds UDP and TCP on addr. With port 0 the kernel picks a UDP
// port that may be taken for TCP: it tries again a few times.
func listenPair(addr string) (*pair, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("parsing listen address: %w", err)
	}
	var lastErr error
	for range 16 {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, fmt.Errorf("listening on udp %s: %w", addr, err)
		}
		uaddr := pc.LocalAddr().(*net.UDPAddr)
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(uaddr.Port)))
		if err != nil {
			pc.Close()
			lastErr = err
			if port == "0" && errors.Is(err, syscall.EADDRINUSE) {
				continue
			}
			break
		}
		ap := uaddr.AddrPort()
		return &pair{pc: pc, ln: ln, addr: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}, nil
	}
	return nil, fmt.Errorf("listening on tcp %s: %w", addr, lastErr)
}

// start starts both servers with handler h and waits until each has
// started or failed. It returns the errors of those that failed; the
// caller then stops the pair.
func (l *pair) start(p *Proxy, h mdns.Handler) error {
	l.stopMu.Lock()
	defer l.stopMu.Unlock()
	mk := func(proto string, s *mdns.Server) *server {
		s.Handler, s.MsgAcceptFunc, s.MsgInvalidFunc = h, p.accept, p.invalid
		return &server{proto: proto, s: s, result: make(chan error, 1)}
	}
	udp := mk("udp", &mdns.Server{PacketConn: l.pc})
	tcp := mk("tcp", &mdns.Server{Listener: l.ln, ReadTimeout: p.timeout + 2*time.Second,
		IdleTimeout: func() time.Duration { return 10 * time.Second }})
	l.servers = []*server{udp, tcp}
	l.wait = time.Duration(len(p.upstream)+1)*p.timeout + 2*time.Second
	var errs []error
	for _, s := range l.servers {
		started := make(chan struct{})
		s.s.NotifyStartedFunc = func() { close(started) }
		go func() { s.result <- s.s.ActivateAndServe() }()
		select {
		case <-started:
			s.started = true
		case err := <-s.result:
			s.result <- err // keep it for stop and stopped
			errs = append(errs, fmt.Errorf("starting %s server on %s: %w", s.proto, l.addr, err))
		}
	}
	return errors.Join(errs...)
}

// stopped returns a channel that receives the first error of a server whose
// serve loop ended.
func (l *pair) stopped() <-chan error {
	out := make(chan error, len(l.servers))
	for _, s := range l.servers {
		go func() {
			err := <-s.result
			s.result <- err
			if err == nil {
				err = errors.New("server stopped")
			}
			out <- err
		}()
	}
	return out
}

// stop shuts the started servers down and closes the sockets. It is safe
// to call more than once.
func (l *pair) stop() error {
	l.stopMu.Lock()
	defer l.stopMu.Unlock()
	if l.done {
		return nil
	}
	l.done = true
	var errs []error
	for _, s := range l.servers {
		if !s.started {
			continue
		}
		// Shutdown waits for the queries being answered, which wait at
		// most one upstream timeout per upstream (Close ends them at once).
		ctx, cancel := context.WithTimeout(context.Background(), l.wait)
		if err := s.s.ShutdownContext(ctx); err != nil {
			errs = append(errs, err)
		}
		// The serve loop closes its socket as it returns, racing
		// Shutdown's own close: the close that loses returns before the
		// socket is released. Waiting for the loop means the port is free
		// when stop returns.
		select {
		case err := <-s.result:
			s.result <- err
		case <-ctx.Done():
		}
		cancel()
	}
	// Closing twice (after the servers did) only returns an error that
	// does not matter.
	_ = l.pc.Close()
	_ = l.ln.Close()
	return errors.Join(errs...)
}

// accept applies miekg/dns's default checks (a query, one question, at most
// one additional record) and counts what they reject.
func (p *Proxy) accept(dh mdns.Header) mdns.MsgAcceptAction {
	a := mdns.DefaultMsgAcceptFunc(dh)
	if a != mdns.MsgAccept {
		p.malformed.Add(1)
	}
	return a
}

// invalid counts packets that could not be parsed.
func (p *Proxy) invalid(_ []byte, _ error) { p.malformed.Add(1) }

var _ mdns.Handler = (*Proxy)(nil)

// ServeDNS answers one parsed query on the shared listener; its session
// comes from WithSession. See serve.
func (p *Proxy) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) { p.serve(w, req, "", false, 0) }

// serve answers one parsed query: REFUSED when it must come from cgroup
// (not 0) and does not, NXDOMAIN when the policy blocks the name, otherwise
// the first upstream answer, or SERVFAIL when no upstream answered. It
// learns the answer's addresses, writes the answer, then emits its event.
// The query belongs to session sid when fixed (a session's own listener),
// otherwise to the session WithSession names for its source.
func (p *Proxy) serve(w mdns.ResponseWriter, req *mdns.Msg, sid string, fixed bool, cgroup uint64) {
	proto := "udp"
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		proto = "tcp"
	}
	if len(req.Question) != 1 {
		// The accept function lets through only one question; never trust
		// that alone.
		p.malformed.Add(1)
		resp := new(mdns.Msg)
		resp.SetRcodeFormatError(req)
		_ = w.WriteMsg(resp)
		return
	}
	q := req.Question[0]
	name := queryName(q.Name)
	src, dst := addrPort(w.RemoteAddr()), addrPort(w.LocalAddr())
	if !fixed {
		sid, _ = p.session(src)
	}
	var (
		resp    *mdns.Msg
		verdict = "allowed"
		reason  string
	)
	sk, skErr := p.socketOf(proto, src, dst, cgroup)
	if cgroup != 0 {
		if owner, why, ok := p.verifySender(sk, skErr, proto, src, sid, cgroup); !ok {
			sid, verdict, reason = owner, "blocked", why
			resp = new(mdns.Msg)
			resp.SetRcode(req, mdns.RcodeRefused)
		}
	}
	if resp == nil {
		if blocked, why := p.policy(name); blocked {
			verdict, reason = "blocked", why
			resp = blockedReply(req, why)
			p.blocked.Add(1)
		} else {
			resp = p.forward(req, proto)
		}
	}
	// Learn before answering: the client may connect to an address as
	// soon as it has the answer.
	if verdict == "allowed" && resp.Rcode == mdns.RcodeSuccess {
		p.learn(name, resp, p.now())
	}
	if err := w.WriteMsg(resp); err != nil {
		p.log.Debug("writing response failed", "proto", proto, "query", name, "error", err)
	}
	p.queries.Add(1)
	ev := p.toEvent(p.now(), sid, proto, src, dst, verdict, reason, q, resp)
	ev.Proc = p.senderOf(sk, skErr)
	p.emit(ev)
}

// errNoSocketLookup stands for the sending socket of a query that nothing
// asked sock_diag about.
var errNoSocketLookup = errors.New("dns: sending socket not looked up")

// socketOf asks the kernel for the socket that sent a query from src to
// dst when the listener checks its cgroup (not 0) or WithSender names its
// process, and returns errNoSocketLookup otherwise.
func (p *Proxy) socketOf(proto string, src, dst netip.AddrPort, cgroup uint64) (peercred.Socket, error) {
	if cgroup == 0 && p.sender == nil {
		return peercred.Socket{}, errNoSocketLookup
	}
	return p.sockOf(proto, src, dst)
}

// senderOf is the process that sent a query from socket sk (found unless
// err), or nil when WithSender is not set or does not know the socket.
func (p *Proxy) senderOf(sk peercred.Socket, err error) *event.Proc {
	if p.sender == nil || err != nil || sk.Cookie == 0 {
		return nil
	}
	proc, ok := p.sender(sk.Cookie)
	if !ok {
		return nil
	}
	proc.CgroupID = sk.Cgroup
	return &proc
}

// verifySender checks that the socket that sent a query from src on
// session sid's listener (sk, found unless err) was created in the
// session's cgroup. When it was not, or cannot be found, ok is false and
// the query is to be refused; owner is then the session it is recorded
// under (the one owning the sender's cgroup, or none) and reason says why.
func (p *Proxy) verifySender(sk peercred.Socket, err error, proto string, src netip.AddrPort, sid string, cgroup uint64) (owner, reason string, ok bool) {
	if err == nil && sk.Cgroup == 0 {
		err = errors.New("no cgroup id (kernel without INET_DIAG_CGROUP_ID)")
	}
	got := sk.Cgroup
	switch {
	case err != nil:
		p.unverified.Add(1)
		p.log.Debug("query sender not verified", "session_id", sid, "proto", proto, "src", src, "error", err)
		return "", fmt.Sprintf("query to the DNS listener of session %s from %s: sending socket not found (%v)", sid, src, err), false
	case got != cgroup:
		p.foreign.Add(1)
		return p.sessionOfCgroup(got), fmt.Sprintf("query to the DNS listener of session %s from a socket of cgroup %d, not the session's", sid, got), false
	}
	return "", "", true
}

// forward asks the upstreams in order over proto and returns the first
// answer, with the client's message id, or SERVFAIL. When WithMaxInflight
// queries are already waiting it returns SERVFAIL at once.
func (p *Proxy) forward(req *mdns.Msg, proto string) *mdns.Msg {
	select {
	case p.inflight <- struct{}{}:
		defer func() { <-p.inflight }()
	default:
		p.shed.Add(1)
		resp := new(mdns.Msg)
		resp.SetRcode(req, mdns.RcodeServerFailure)
		return resp
	}
	base := p.base
	// The client sizes its read buffer from the query's EDNS(0) size, as
	// the upstream sizes its answer.
	c := &mdns.Client{Net: proto, Timeout: p.timeout}
	for _, u := range p.upstream {
		resp, err := p.exchange(base, c, req, u)
		if err != nil {
			p.log.Debug("upstream exchange failed", "upstream", u, "proto", proto, "error", err)
			continue
		}
		resp.Id = req.Id
		return resp
	}
	p.upstreamFailures.Add(1)
	resp := new(mdns.Msg)
	resp.SetRcode(req, mdns.RcodeServerFailure)
	return resp
}

// exchange asks one upstream. Over TCP it reuses an idle connection to the
// upstream when there is one; when that fails (the upstream closed it
// meanwhile) it dials a fresh one within the same timeout.
func (p *Proxy) exchange(base context.Context, c *mdns.Client, req *mdns.Msg, upstream string) (*mdns.Msg, error) {
	ctx, cancel := context.WithTimeout(base, p.timeout)
	defer cancel()
	tcp := c.Net == "tcp"
	if tcp {
		if conn := p.pool.get(upstream); conn != nil {
			resp, ok, err := exchangeOn(ctx, c, req, conn)
			if err == nil {
				p.keep(upstream, conn, ok)
				return resp, nil
			}
			conn.Close()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("exchanging with upstream: %w", err)
			}
		}
	}
	conn, err := c.DialContext(ctx, upstream)
	if err != nil {
		return nil, fmt.Errorf("dialing upstream: %w", err)
	}
	resp, ok, err := exchangeOn(ctx, c, req, conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("exchanging with upstream: %w", err)
	}
	if tcp {
		p.keep(upstream, conn, ok)
	} else {
		conn.Close()
	}
	return resp, nil
}

// keep puts a TCP connection back into the pool when its last exchange left
// it usable, and closes it otherwise.
func (p *Proxy) keep(upstream string, conn *mdns.Conn, ok bool) {
	if !ok {
		conn.Close()
		return
	}
	p.pool.put(upstream, conn)
}

// exchangeOn sends req on conn and reads the answer. miekg/dns honours only
// the context's deadline, so a cancelled context (Close) also sets the
// connection's deadline to end a wait at once; reusable is false when that
// happened, because the connection's deadline is then spent.
func exchangeOn(ctx context.Context, c *mdns.Client, req *mdns.Msg, conn *mdns.Conn) (resp *mdns.Msg, reusable bool, err error) {
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	resp, _, err = c.ExchangeWithConnContext(ctx, req.Copy(), conn)
	reusable = stop()
	return resp, reusable, err
}

// blockedReply is the NXDOMAIN answer to a blocked query. A client that
// speaks EDNS(0) also gets an Extended DNS Error "Blocked" (RFC 8914) with
// the reason as its text.
func blockedReply(req *mdns.Msg, reason string) *mdns.Msg {
	resp := new(mdns.Msg)
	resp.SetRcode(req, mdns.RcodeNameError)
	resp.RecursionAvailable = true
	if opt := req.IsEdns0(); opt != nil {
		o := resp.SetEdns0(opt.UDPSize(), false).IsEdns0()
		o.Option = append(o.Option, &mdns.EDNS0_EDE{InfoCode: mdns.ExtendedErrorCodeBlocked, ExtraText: reason})
	}
	return resp
}

// learn puts the A and AAAA answers of resp into the IP→domain map under the
// name the client asked for, until their TTL runs out, and passes each to
// the answer hook.
func (p *Proxy) learn(name string, resp *mdns.Msg, now time.Time) {
	for _, rr := range resp.Answer {
		var a netip.Addr
		switch r := rr.(type) {
		case *mdns.A:
			a, _ = netip.AddrFromSlice(r.A.To4())
		case *mdns.AAAA:
			a, _ = netip.AddrFromSlice(r.AAAA.To16())
		default:
			continue
		}
		if !a.IsValid() {
			continue
		}
		a = a.Unmap()
		ttl := time.Duration(rr.Header().Ttl) * time.Second
		p.domains.put(a, name, now.Add(max(ttl, MinDomainTTL)))
		p.answerHook(name, a, ttl)
	}
}

// DomainOf returns the name that most recently resolved to ip, while that
// answer's TTL has not run out.
func (p *Proxy) DomainOf(ip netip.Addr) (string, bool) {
	return p.domains.get(ip.Unmap(), p.now())
}

// queryName is name in lower case without the trailing dot; the root is ".".
func queryName(name string) string {
	n := strings.TrimSuffix(strings.ToLower(name), ".")
	if n == "" {
		return "."
	}
	return n
}

// addrPort converts a socket address; other addresses become the zero value.
func addrPort(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.UDPAddr:
		ap = a.AddrPort()
	case *net.TCPAddr:
		ap = a.AddrPort()
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
