// Package egress is the egress policy in the flat form that a kernel
// enforcer compiles into maps: the table of addresses and ports ([Table]),
// what the policy says about a domain name ([DomainClass]) and the verdicts
// ([Verdict]).
//
// It imports only the standard library, so that the enforcer (the eBPF
// collector) can take an egress policy without depending on the policy
// engine and its YAML, viper and version parsers. Package policy builds
// these values (policy.Engine.EgressTable and EgressDomain) and re-exports
// the types under its own names (policy.EgressTable, policy.Verdict, …).
//
// Trust model: a Table is trusted configuration, compiled by the policy
// engine from root's policy file.
package egress

import (
	"net/netip"
	"strings"
)

// Verdict is the outcome of a policy decision.
type Verdict string

// The verdicts, from least to most severe. They are the values of
// event.Pkg.Verdict.
const (
	Allow Verdict = "allow"
	Flag  Verdict = "flag"
	Block Verdict = "block"
)

// Past returns the verdict as event.Net.Verdict spells it: allowed, flagged
// or blocked.
func (v Verdict) Past() string {
	switch v {
	case Allow:
		return "allowed"
	case Flag:
		return "flagged"
	}
	return "blocked"
}

// Table is the egress policy in the flat form that a kernel enforcer
// (the collector's BPF connect hooks) compiles into maps. Given the class of
// a connection's domain (DomainClass), its address, port and protocol, the
// verdict the rules below yield is the verdict of policy.Engine.Egress, in
// the same order:
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
// in the policy matches nothing, as in policy.Engine.Egress.
type Table struct {
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

// Match reports whether port and proto (in any case) fall in r.
func (r PortRange) Match(port uint16, proto string) bool {
	return port >= r.Lo && port <= r.Hi && (r.Proto == "" || r.Proto == strings.ToLower(proto))
}

// DomainClass is what the egress rules say about a domain name, for the
// rules of Table that look at the domain.
type DomainClass struct {
	// Blocked: the domain matches egress.blocked_domains.
	Blocked bool
	// DoH: the domain matches a DoH endpoint given by name.
	DoH bool
	// Allowed: the domain matches egress.allowed_domains.
	Allowed bool
}
