// Package dnsproxy is the daemon's DNS proxy, one per machine.
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
// With WithCgroup the proxy also asks the kernel (sock_diag, through the
// one attribution step, kernel/attribution's Socket) which cgroup the
// sending socket belongs to, and refuses queries sent to a session's
// listener from anywhere else.
// The optional shared listener (Listen, Serve) attributes queries by their
// source address instead (WithSession).
//
// Trust model: the proxy runs as root on the machine, outside the sandbox,
// in the daemon. The collector's BPF programs redirect every port-53
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
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/kernel/attribution"
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
	// clients is the attribution step over the listeners' cgroups
	// (listenerCgroups): which socket sent a query, and whose it is.
	clients *attribution.Attributor
	sender  SenderFunc
	host    string

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
	}
	for _, o := range opts {
		o(p)
	}
	p.log = p.log.Named("dns")
	p.clients = attribution.New(listenerCgroups{p})
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
