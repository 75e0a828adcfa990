// Package dns is the collector's per-host DNS proxy.
//
// A Proxy answers DNS queries over UDP and TCP on one port by forwarding
// them, unchanged, to upstream resolvers (by default the nameservers of
// /etc/resolv.conf), and returns the upstream answer unchanged. Each query
// becomes exactly one "net.dns" event, built in toEvent, with the query name
// and type, the response code and the answers with their TTLs. A name the
// policy blocks is answered NXDOMAIN without asking upstream, and its event
// has verdict "blocked". The A and AAAA answers fill a bounded IP→domain map
// with TTL expiry (DomainOf), so that net.connect events can name the domain.
//
// Trust model: the proxy runs as root on the host, outside the sandbox, as
// part of the collector. The collector's BPF programs redirect every port-53
// packet of a session cgroup to it (issue 5), and the session a query belongs
// to is attributed from the redirected socket's cgroup through the session
// callback (WithSession), never from anything in the packet. Its events
// therefore carry source "kernel" and are trusted like the collector's own.
// Everything in a query or an upstream answer is untrusted bytes: malformed
// queries are answered FORMERR or dropped, and counted, and never crash the
// proxy.
//
// The emit callback is called once per query after the answer was written,
// from the goroutine serving that query. It must never block: pass a
// non-blocking emit such as record/queue's (*Queue).Emit, which drops and
// counts when its consumer is slow. A blocking emit is a bug of the caller;
// it does not delay answers, but it holds one goroutine per query.
package dns

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

	"github.com/sandtrail/sandtrail/record/event"
)

// Errors returned by New, Listen and Serve.
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
)

// Policy decides whether a name may be resolved. name is the query name in
// lower case without the trailing dot ("registry.npmjs.org"). reason is
// recorded with a blocked query.
type Policy func(name string) (blocked bool, reason string)

// SessionFunc attributes a query to a session by its client's address.
type SessionFunc func(src netip.AddrPort) (sessionID string, ok bool)

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

// WithSession sets the function that attributes a query to a session. By
// default events carry no session id.
func WithSession(session SessionFunc) Option { return func(p *Proxy) { p.session = session } }

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

// WithResolvConf sets the resolver configuration file read when New gets no
// upstream (DefaultResolvConf by default).
func WithResolvConf(path string) Option { return func(p *Proxy) { p.resolvConf = path } }

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
}

// Proxy is a DNS forwarding proxy that records every query.
type Proxy struct {
	upstream    []string
	log         hclog.Logger
	emit        func(*event.Event)
	policy      Policy
	session     SessionFunc
	timeout     time.Duration
	now         func() time.Time
	maxDomains  int
	maxInflight int
	resolvConf  string
	inflight    chan struct{} // one token per query waiting for an upstream
	host        string

	domains *domainMap

	queries, blocked, upstreamFailures, shed, malformed atomic.Uint64

	mu      sync.Mutex
	pc      net.PacketConn
	ln      net.Listener
	udp     *mdns.Server
	tcp     *mdns.Server
	addr    netip.AddrPort
	closed  bool
	baseCtx context.Context
	cancel  context.CancelFunc
	ready   chan struct{} // closed once both servers started or failed
}

// New returns a Proxy forwarding to upstream, a list of resolver addresses
// ("192.0.2.1", "192.0.2.1:53", "[2001:db8::1]:5353"; port 53 when none is
// given). With no upstream it reads the nameservers of /etc/resolv.conf (see
// WithResolvConf). It returns ErrNoUpstream when there is none, and an error
// for an address that is not an IP address with an optional port.
func New(upstream []string, opts ...Option) (*Proxy, error) {
	p := &Proxy{
		log:         hclog.NewNullLogger(),
		emit:        func(*event.Event) {},
		policy:      func(string) (bool, string) { return false, "" },
		session:     func(netip.AddrPort) (string, bool) { return "", false },
		timeout:     DefaultTimeout,
		now:         time.Now,
		maxDomains:  DefaultMaxDomains,
		maxInflight: DefaultMaxInflight,
		resolvConf:  DefaultResolvConf,
	}
	for _, o := range opts {
		o(p)
	}
	p.log = p.log.Named("dns")
	if len(upstream) == 0 {
		cfg, err := mdns.ClientConfigFromFile(p.resolvConf)
		if err != nil {
			return nil, fmt.Errorf("reading resolver configuration: %w", err)
		}
		for _, s := range cfg.Servers {
			upstream = append(upstream, net.JoinHostPort(s, cfg.Port))
		}
	}
	for _, u := range upstream {
		a, err := parseUpstream(u)
		if err != nil {
			return nil, err
		}
		p.upstream = append(p.upstream, a)
	}
	if len(p.upstream) == 0 {
		return nil, ErrNoUpstream
	}
	p.domains = newDomainMap(p.maxDomains)
	p.inflight = make(chan struct{}, p.maxInflight)
	return p, nil
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
	return Stats{
		Queries:          p.queries.Load(),
		Blocked:          p.blocked.Load(),
		UpstreamFailures: p.upstreamFailures.Load(),
		Shed:             p.shed.Load(),
		Malformed:        p.malformed.Load(),
	}
}

// Addr returns the address the proxy listens on (UDP and TCP share the
// port), or the zero AddrPort before Listen.
func (p *Proxy) Addr() netip.AddrPort {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
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

// Listen binds the UDP and TCP sockets on addr without serving yet, so that
// Addr is known before Serve runs.
func (p *Proxy) Listen(addr string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.pc != nil {
		return ErrListening
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("parsing listen address: %w", err)
	}
	// With port 0 the kernel picks a UDP port that may be taken for TCP:
	// try again a few times.
	var lastErr error
	for range 16 {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return fmt.Errorf("listening on udp %s: %w", addr, err)
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
		p.pc, p.ln = pc, ln
		p.addr = uaddr.AddrPort()
		p.addr = netip.AddrPortFrom(p.addr.Addr().Unmap(), p.addr.Port())
		return nil
	}
	return fmt.Errorf("listening on tcp %s: %w", addr, lastErr)
}

// Serve serves the sockets bound by Listen until ctx is done or Close is
// called.
func (p *Proxy) Serve(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	if p.pc == nil {
		p.mu.Unlock()
		return ErrNotListening
	}
	if p.udp != nil {
		p.mu.Unlock()
		return ErrListening
	}
	p.baseCtx, p.cancel = context.WithCancel(ctx)
	p.ready = make(chan struct{})
	started := make(chan struct{}, 2)
	notify := func() { started <- struct{}{} }
	p.udp = &mdns.Server{PacketConn: p.pc, Handler: p, MsgAcceptFunc: p.accept, MsgInvalidFunc: p.invalid,
		NotifyStartedFunc: notify}
	p.tcp = &mdns.Server{Listener: p.ln, Handler: p, MsgAcceptFunc: p.accept, MsgInvalidFunc: p.invalid,
		NotifyStartedFunc: notify, ReadTimeout: p.timeout + 2*time.Second,
		IdleTimeout: func() time.Duration { return 10 * time.Second }}
	udp, tcp, base, ready := p.udp, p.tcp, p.baseCtx, p.ready
	p.mu.Unlock()

	errc := make(chan error, 2)
	go func() { errc <- udp.ActivateAndServe() }()
	go func() { errc <- tcp.ActivateAndServe() }()
	// Wait until each server started or failed, so that Close never races a
	// server that has not started yet (its shutdown would fail, and the
	// server would then run on).
	var (
		errs     []error
		returned int // servers whose ActivateAndServe returned
	)
	for range 2 {
		select {
		case <-started:
		case err := <-errc:
			returned++
			errs = append(errs, err)
		}
	}
	close(ready)
	if returned == 0 {
		select {
		case <-base.Done():
		case err := <-errc:
			returned++
			errs = append(errs, err)
		}
	}
	// A server that returns after the caller's Close or the end of ctx was
	// shut down; only a server that stopped on its own is an error.
	p.mu.Lock()
	stopped := p.closed || ctx.Err() != nil
	p.mu.Unlock()
	p.Close()
	for range 2 - returned {
		<-errc
	}
	if err := errors.Join(errs...); err != nil && !stopped {
		return fmt.Errorf("serving dns: %w", err)
	}
	return nil
}

// Close stops serving and closes the sockets. It is safe to call more than
// once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	udp, tcp, pc, ln, cancel, ready := p.udp, p.tcp, p.pc, p.ln, p.cancel, p.ready
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if ready != nil {
		<-ready
	}
	var errs []error
	for _, s := range []*mdns.Server{udp, tcp} {
		if s == nil {
			continue
		}
		ctx, done := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.ShutdownContext(ctx); err != nil && !strings.Contains(err.Error(), "server not started") {
			errs = append(errs, err)
		}
		done()
	}
	if udp == nil && pc != nil {
		errs = append(errs, pc.Close())
	}
	if tcp == nil && ln != nil {
		errs = append(errs, ln.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing dns proxy: %w", err)
	}
	return nil
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

// ServeDNS answers one parsed query: NXDOMAIN when the policy blocks the
// name, otherwise the first upstream answer, or SERVFAIL when no upstream
// answered. It writes the answer, then records it and emits its event.
func (p *Proxy) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) {
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
	var (
		resp    *mdns.Msg
		verdict = "allowed"
		reason  string
	)
	if blocked, why := p.policy(name); blocked {
		verdict, reason = "blocked", why
		resp = blockedReply(req, why)
		p.blocked.Add(1)
	} else {
		resp = p.forward(req, proto)
	}
	if err := w.WriteMsg(resp); err != nil {
		p.log.Debug("writing response failed", "proto", proto, "query", name, "error", err)
	}
	p.queries.Add(1)
	now := p.now()
	if verdict == "allowed" && resp.Rcode == mdns.RcodeSuccess {
		p.learn(name, resp, now)
	}
	src, dst := addrPort(w.RemoteAddr()), addrPort(w.LocalAddr())
	sid, _ := p.session(src)
	p.emit(p.toEvent(now, sid, proto, src, dst, verdict, reason, q, resp))
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
	p.mu.Lock()
	base := p.baseCtx
	p.mu.Unlock()
	if base == nil {
		base = context.Background()
	}
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

// exchange asks one upstream. miekg/dns honours only the context's deadline,
// so a cancelled context (Close) also sets the connection's deadline to end a
// wait at once.
func (p *Proxy) exchange(base context.Context, c *mdns.Client, req *mdns.Msg, upstream string) (*mdns.Msg, error) {
	ctx, cancel := context.WithTimeout(base, p.timeout)
	defer cancel()
	conn, err := c.DialContext(ctx, upstream)
	if err != nil {
		return nil, fmt.Errorf("dialing upstream: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	resp, _, err := c.ExchangeWithConnContext(ctx, req.Copy(), conn)
	if err != nil {
		return nil, fmt.Errorf("exchanging with upstream: %w", err)
	}
	return resp, nil
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
// name the client asked for, until their TTL runs out.
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
		p.domains.put(a.Unmap(), name, now.Add(time.Duration(rr.Header().Ttl)*time.Second))
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
