package policy

import (
	"net"
	"slices"
	"strings"
)

// RegistriesThroughMirror returns an engine that decides egress as e does,
// and also refuses every host of the approved registries (sources.registries)
// to a session: looked up, the DNS proxy answers NXDOMAIN; connected to by
// a name the proxy answered, the kernel refuses it. The host uses it for
// its sessions when it serves the mirror, which is then the only road to a
// registry; the mirror itself runs outside every session and keeps e.
// A registry host that is an IP address, or that egress.allowed_domains or a
// session's rules name, is not refused by name (the DNS proxy never sees
// it): it still goes around the mirror, and the package view's
// unverified_install and the mirror's shim_bypass are what catch it.
func (e *Engine) RegistriesThroughMirror() *Engine {
	c := *e.c
	c.blockedDomains = slices.Clone(e.c.blockedDomains)
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
			if host == "" || seen[host] || net.ParseIP(strings.Trim(host, "[]")) != nil {
				continue
			}
			seen[host] = true
			c.blockedDomains = append(c.blockedDomains, domainRule{name: host,
				field: u.field + ": a registry, reached from a session only through the mirror (SANDTRAIL_MIRROR)"})
		}
	}
	return &Engine{p: e.p, c: &c, home: e.home, now: e.now}
}
