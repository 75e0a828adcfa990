package policies

import (
	"net"
	"net/netip"
	"slices"
	"strings"
)

// RegistriesThroughMirror returns an engine that decides egress as e does,
// and also refuses every host of the approved registries (sources.registries)
// to a session: looked up, the DNS proxy answers NXDOMAIN; connected to by
// a name the proxy answered, the kernel refuses it. The host uses it for
// its sessions when it serves the mirror, which is then the only road to a
// registry; the mirror itself runs outside every session and keeps e.
// By address: a registry given by IP address is a blocked CIDR (unless it
// is a loopback address, where the mirror itself listens), and the host
// tells the kernel each address the mirror connects to for a registry's
// name, which a session's connection to it is then decided by, looked up
// or not.
func (e *Engine) RegistriesThroughMirror() *Engine {
	c := *e.c
	c.blockedDomains = slices.Clone(e.c.blockedDomains)
	c.blockedCIDRs = slices.Clone(e.c.blockedCIDRs)
	seen := map[string]bool{}
	for _, d := range c.blockedDomains {
		seen[d.name] = true
	}
	ecos := make([]string, 0, len(e.c.registries))
	for eco := range e.c.registries {
		ecos = append(ecos, eco)
	}
	slices.Sort(ecos)
	for _, eco := range ecos {
		for _, u := range e.c.registries[eco] {
			host := strings.ToLower(u.host)
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			if host == "" || seen[host] {
				continue
			}
			seen[host] = true
			reason := u.field + ": a registry, reached from a session only through the mirror (SANDTRAIL_MIRROR)"
			if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
				if ip = ip.Unmap(); !ip.IsLoopback() && !ip.IsUnspecified() {
					c.blockedCIDRs = append(c.blockedCIDRs, cidrRule{prefix: netip.PrefixFrom(ip, ip.BitLen()), field: reason})
				}
				continue
			}
			c.blockedDomains = append(c.blockedDomains, domainRule{name: host, field: reason})
		}
	}
	return &Engine{p: e.p, c: &c, home: e.home, now: e.now}
}
