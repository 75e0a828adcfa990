package dnsproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	mdns "github.com/miekg/dns"
)

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
