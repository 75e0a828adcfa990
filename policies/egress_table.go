package policies

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/policies/egress"
)

// EgressTable is the egress policy in the flat form that a kernel enforcer
// (the collector's BPF connect hooks) compiles into maps: see egress.Table
// for the rules it encodes, which yield the verdict of Engine.Egress.
type EgressTable = egress.Table

// PortRange is an inclusive range of ports for a protocol.
type PortRange = egress.PortRange

// DomainClass is what the egress rules say about a domain name
// (EgressDomain), for the rules of EgressTable that look at the domain.
type DomainClass = egress.DomainClass

// EgressTable returns the compiled egress rules. The slices are copies.
func (e *Engine) EgressTable() EgressTable {
	c := e.c
	t := EgressTable{
		Default:      c.egressDefault,
		DoHAction:    c.dohAction,
		AllowedDests: len(c.allowedDomains)+len(c.allowedCIDRs) > 0,
		UnixDefault:  c.unixDefault,
		UnixAllowed:  slices.Clone(c.unixAllowed),
		RawSockets:   c.rawSockets,
	}
	for _, r := range c.blockedCIDRs {
		t.BlockedCIDRs = append(t.BlockedCIDRs, r.prefix)
	}
	for _, r := range c.allowedCIDRs {
		t.AllowedCIDRs = append(t.AllowedCIDRs, r.prefix)
	}
	for _, r := range c.doh {
		if r.addr.IsValid() && !slices.Contains(t.DoHAddrs, r.addr) {
			t.DoHAddrs = append(t.DoHAddrs, r.addr)
		}
	}
	for _, r := range c.blockedPorts {
		t.BlockedPorts = append(t.BlockedPorts, PortRange{Lo: r.lo, Hi: r.hi, Proto: r.proto})
	}
	for _, r := range c.allowedPorts {
		t.AllowedPorts = append(t.AllowedPorts, PortRange{Lo: r.lo, Hi: r.hi, Proto: r.proto})
	}
	return t
}

// EgressReason is the reason of Egress's decision on the same connection:
// what a kernel enforcer, which decides with EgressTable and EgressDomain,
// records with a verdict.
func (e *Engine) EgressReason(domain string, ip netip.Addr, port uint16, proto string) string {
	return e.Egress(domain, ip, port, proto).Reason
}

// EgressDomain classifies domain (case and a trailing dot do not matter)
// against the domain rules of the egress policy. The empty name matches
// nothing.
func (e *Engine) EgressDomain(domain string) DomainClass {
	c := e.c
	host := strings.TrimSuffix(strings.ToLower(domain), ".")
	var dc DomainClass
	if host == "" {
		return dc
	}
	for _, d := range c.blockedDomains {
		if d.match(host) {
			dc.Blocked = true
			break
		}
	}
	for _, r := range c.doh {
		if r.domain != nil && r.domain.match(host) {
			dc.DoH = true
			break
		}
	}
	for _, d := range c.allowedDomains {
		if d.match(host) {
			dc.Allowed = true
			break
		}
	}
	return dc
}
