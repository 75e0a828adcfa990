package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/sandtrail/sandtrail/collector"
	"github.com/sandtrail/sandtrail/collector/session"
	"github.com/sandtrail/sandtrail/dnsproxy"
	"github.com/sandtrail/sandtrail/record/event"
)

// Check rejects DNS settings that cannot work.
func (c *DNSConfig) Check() error {
	if c.Timeout <= 0 {
		return fmt.Errorf("config: dns.timeout %v must be positive", c.Timeout)
	}
	if c.MaxSessions <= 0 {
		return fmt.Errorf("config: dns.max_sessions %d must be positive", c.MaxSessions)
	}
	return nil
}

// startDNS builds the daemon's DNS proxy when dns.enabled is set. Its
// upstreams are dns.upstream, or the nameservers of /etc/resolv.conf; when
// resolv.conf gives none that is usable, the proxy answers SERVFAIL (and
// still records every lookup) rather than stopping the daemon. It refuses the
// policy's blocked domains, emits into the daemon's queue, feeds its
// answers to the collector (learnDomain) and names each query's sending
// process from the collector's record of its socket (dnsSenderOf). It must run before the collector
// is created, which takes the proxy's domain lookup (dnsCollectorOptions).
func (d *Daemon) startDNS() error {
	c := d.cfg.DNS
	if !c.Enabled {
		d.log.Info("dns proxy disabled (dns.enabled false): session lookups are not recorded")
		return nil
	}
	up := c.Upstream
	if len(up) == 0 {
		var err error
		if up, err = dnsproxy.ResolvConf(dnsproxy.DefaultResolvConf); err != nil {
			d.log.Warn("dns proxy has no usable upstream resolver; session lookups are answered SERVFAIL until dns.upstream is set",
				"error", err)
		}
	}
	p, err := dnsproxy.New(up,
		dnsproxy.WithAllowNoUpstream(),
		dnsproxy.WithLogger(d.log),
		dnsproxy.WithHost(d.cfg.Host),
		dnsproxy.WithTimeout(c.Timeout),
		dnsproxy.WithMaxSessions(c.MaxSessions),
		dnsproxy.WithPolicy(d.egress.DomainBlocked),
		dnsproxy.WithEmit(d.q.Emit),
		dnsproxy.WithAnswerHook(d.learnDomain),
		dnsproxy.WithSender(d.dnsSenderOf))
	if err != nil {
		return fmt.Errorf("config: dns.upstream: %w", err)
	}
	d.dns = p
	if err := dnsproxy.CheckSocketLookup(); err != nil {
		d.log.Warn("dns proxy cannot check which cgroup sent a query; a session could put lookups into another session's record",
			"error", err)
	} else {
		d.dnsSender = true
	}
	d.log.Debug("dns proxy started", "upstream", p.Upstream(), "sender_check", d.dnsSender)
	return nil
}

// dnsCollectorOptions are the collector options that name addresses in
// net events from the proxy's answers.
func (d *Daemon) dnsCollectorOptions() []collector.Option {
	if d.dns == nil {
		return nil
	}
	p := d.dns
	return []collector.Option{collector.WithDomainLookup(func(ip netip.Addr) string {
		if d, ok := p.DomainOf(ip); ok {
			return d
		}
		return d.upstreams.name(ip)
	})}
}

// maxUpstreamNames bounds the addresses the daemon names from the mirror's
// connections; past it, new ones are still refused (the collector learns
// them) but net events name them by the DNS proxy's answers only.
const maxUpstreamNames = 4096

// upstreamNames maps each address the mirror connected to onto the name
// it connected for.
type upstreamNames struct {
	mu sync.RWMutex
	m  map[netip.Addr]string
}

func (u *upstreamNames) add(ip netip.Addr, name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[netip.Addr]string{}
	}
	if _, ok := u.m[ip]; ok || len(u.m) < maxUpstreamNames {
		u.m[ip] = name
	}
}

func (u *upstreamNames) name(ip netip.Addr) string {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.m[ip.Unmap()]
}

// learnDomain is the proxy's answer hook: the collector's egress map learns
// which domain ip was answered for, before the agent has the answer.
func (d *Daemon) learnDomain(domain string, ip netip.Addr, ttl time.Duration) {
	if d.col == nil {
		return
	}
	if err := d.col.LearnDomain(ip, domain, ttl); err != nil && !errors.Is(err, collector.ErrClosed) {
		d.log.Debug("collector did not learn a dns answer", "domain", domain, "ip", ip, "error", err)
	}
}

// upstreamTTL is how long an address the mirror connected to stays
// learned; each new connection renews it.
const upstreamTTL = 6 * time.Hour

// learnUpstream tells the collector that the mirror connected to addr for
// the name, so that a session's connection to addr is decided as one to
// the name: when it is an approved registry's, refused like its name (the session
// egress of RegistriesThroughMirror), even by an agent that never looked
// it up. An address on loopback, where the mirror itself listens, is
// never learned, nor is an upstream given by address (the policy refuses
// that address itself).
func (d *Daemon) learnUpstream(name string, addr netip.Addr) {
	if _, err := netip.ParseAddr(name); err == nil || addr.IsLoopback() || addr.IsUnspecified() {
		return
	}
	d.upstreams.add(addr, name)
	if d.col == nil {
		return
	}
	if err := d.col.LearnDomain(addr, name, upstreamTTL); err != nil && !errors.Is(err, collector.ErrClosed) {
		d.log.Warn("a session may reach this registry address around the mirror: the collector did not learn it",
			"host", name, "ip", addr, "error", err)
	}
}

// dnsSenderOf is the proxy's sender lookup: the process the collector saw
// connect or send the redirected socket with this cookie.
func (d *Daemon) dnsSenderOf(cookie uint64) (event.Proc, bool) {
	if d.col == nil {
		return event.Proc{}, false
	}
	return d.col.DNSSender(cookie)
}

// redirectDNS gives session s its proxy listeners, which answer only the
// session's own sockets when the kernel can tell, and has the collector
// send the session's port-53 traffic to them. The caller has the collector
// watch s first, and runs nothing in s before this returns.
func (d *Daemon) redirectDNS(s *session.Session) error {
	if d.dns == nil {
		return nil
	}
	var opts []dnsproxy.SessionOption
	if d.dnsSender {
		opts = append(opts, dnsproxy.WithCgroup(s.CgroupID()))
	}
	v4, v6, err := d.dns.AddSession(s.ID(), opts...)
	if err != nil {
		return fmt.Errorf("starting the dns proxy for session %s: %w", s.ID(), err)
	}
	if err := d.col.RedirectDNS(s.CgroupID(), v4, v6); err != nil {
		_ = d.dns.RemoveSession(s.ID())
		return fmt.Errorf("redirecting dns of session %s (dns.enabled false runs sessions without the dns proxy): %w", s.ID(), err)
	}
	return nil
}

// releaseDNS closes session id's proxy listeners. A session that has none
// (the proxy was closed first) is no error.
func (d *Daemon) releaseDNS(id string) error {
	if d.dns == nil {
		return nil
	}
	if err := d.dns.RemoveSession(id); err != nil && !errors.Is(err, dnsproxy.ErrUnknownSession) {
		return err
	}
	return nil
}
