package policy

import (
	"net/netip"
	"slices"
	"strings"
)

// EgressTable is the egress policy in the flat form that a kernel enforcer
// (the collector's BPF connect hooks) compiles into maps. Given the class of
// a connection's domain (EgressDomain), its address, port and protocol, the
// verdict the rules below yield is the verdict of Engine.Egress, in the same
// order:
//
//  1. the domain is blocked (DomainClass.Blocked) → block;
//  2. the address is in a BlockedCIDRs prefix → block;
//  3. the port matches a BlockedPorts range → block;
//  4. on ports 443, 853 (and 0), the domain is a DoH endpoint
//     (DomainClass.DoH) or the address is in DoHAddrs → DoHAction;
//  5. when AllowedDests or AllowedPorts is set: the destination is allowed
//     (no AllowedDests, or DomainClass.Allowed, or the address is in an
//     AllowedCIDRs prefix) and the port matches an AllowedPorts range (or
//     there are none) → allow;
//  6. Default.
//
// Addresses are compared unmapped: a v4-mapped IPv6 address is its IPv4
// address. Prefixes are kept as written (masked), so an IPv4-mapped prefix
// in the policy matches nothing, as in Engine.Egress.
type EgressTable struct {
	Default   Verdict
	DoHAction Verdict
	// BlockedCIDRs and AllowedCIDRs are masked prefixes.
	BlockedCIDRs []netip.Prefix
	AllowedCIDRs []netip.Prefix
	// DoHAddrs are the DoH endpoints given as addresses, unmapped.
	DoHAddrs []netip.Addr
	// BlockedPorts and AllowedPorts are inclusive port ranges.
	BlockedPorts []PortRange
	AllowedPorts []PortRange
	// AllowedDests is true when the policy lists allowed domains or
	// allowed CIDRs, so that a destination must match one of them.
	AllowedDests bool
}

// PortRange is an inclusive range of ports for a protocol.
type PortRange struct {
	Lo, Hi uint16
	// Proto is "tcp", "udp", or "" for both.
	Proto string
}

// Match reports whether port and proto fall in r.
func (r PortRange) Match(port uint16, proto string) bool {
	return portRule{lo: r.Lo, hi: r.Hi, proto: r.Proto}.match(port, proto)
}

// DomainClass is what the egress rules say about a domain name, for the
// rules of EgressTable that look at the domain.
type DomainClass struct {
	// Blocked: the domain matches egress.blocked_domains.
	Blocked bool
	// DoH: the domain matches a DoH endpoint given by name.
	DoH bool
	// Allowed: the domain matches egress.allowed_domains.
	Allowed bool
}

// EgressTable returns the compiled egress rules. The slices are copies.
func (e *Engine) EgressTable() EgressTable {
	c := e.c
	t := EgressTable{
		Default:      c.egressDefault,
		DoHAction:    c.dohAction,
		AllowedDests: len(c.allowedDomains)+len(c.allowedCIDRs) > 0,
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
