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
	"fmt"
	"net/netip"
	"strconv"
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
//  4. on any port but 53, the domain is a DoH endpoint (DomainClass.DoH)
//     or the address is in DoHAddrs → DoHAction;
//  5. when AllowedDests or AllowedPorts is set: the destination is allowed
//     (no AllowedDests, or DomainClass.Allowed, or the address is in an
//     AllowedCIDRs prefix) and the port matches an AllowedPorts range (or
//     there are none) → allow;
//  6. Default.
//
// Addresses are compared unmapped: a v4-mapped IPv6 address is its IPv4
// address. Prefixes are kept as written (masked), so an IPv4-mapped prefix
// in the policy matches nothing, as in policy.Engine.Egress.
//
// An address of 0.0.0.0/8 or :: counts as loopback as well ([Loopback]):
// Linux connects 0.0.0.0 and :: to the local host (127.0.0.1, ::1). Such
// an address is in BlockedCIDRs, or in DoHAddrs, when it or its loopback
// address is; it is in AllowedCIDRs only when both are.
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

	// UnixDefault is the verdict on a unix socket connect or addressed
	// send whose address no entry of UnixAllowed (nor the enforcer's own
	// always-allowed sockets) allows; "" is Allow.
	UnixDefault Verdict
	// UnixAllowed are the unix socket addresses allowed whatever
	// UnixDefault says ([UnixEntry] syntax), with ~/ not expanded: the
	// enforcer adds each session's own (policy.Engine.UnixAllowed).
	UnixAllowed []string
	// RawSockets is Block to refuse raw sockets of inet and inet6 and
	// packet sockets; "" is Allow.
	RawSockets Verdict
}

// UnixEntry is one entry of an allowlist of unix socket addresses, parsed:
// "/dir/" allows every pathname beneath dir, "/path" that pathname alone,
// "@name" that abstract name alone and "@prefix*" every abstract name
// beginning with prefix. A byte may be written \xNN (a NUL in an abstract
// name, a "*" at the end of one). Name is the bytes of sun_path (an
// abstract name with its leading NUL), without the "*".
type UnixEntry struct {
	Name   []byte
	Prefix bool
}

// UnixPathMax is the size of sun_path.
const UnixPathMax = 108

// ParseUnixEntry parses an entry of UnixAllowed. It returns an error for a
// relative path, a path with a "." or ".." component, an empty name, or a
// name longer than sun_path.
func ParseUnixEntry(s string) (UnixEntry, error) {
	var e UnixEntry
	raw, ok := strings.CutPrefix(s, "@")
	if ok {
		e.Prefix = strings.HasSuffix(raw, "*")
		raw = strings.TrimSuffix(raw, "*")
		e.Name = []byte{0}
	} else {
		if !strings.HasPrefix(s, "/") {
			return e, fmt.Errorf("unix address %q: neither an absolute path nor @name", s)
		}
		for _, c := range strings.Split(s, "/") {
			if c == "." || c == ".." {
				return e, fmt.Errorf("unix address %q: has a %q component", s, c)
			}
		}
		e.Prefix = strings.HasSuffix(s, "/")
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			e.Name = append(e.Name, raw[i])
			continue
		}
		if i+3 >= len(raw) || raw[i+1] != 'x' {
			return e, fmt.Errorf("unix address %q: a \\ not followed by xNN", s)
		}
		v, err := strconv.ParseUint(raw[i+2:i+4], 16, 8)
		if err != nil {
			return e, fmt.Errorf("unix address %q: a \\ not followed by xNN", s)
		}
		e.Name = append(e.Name, byte(v))
		i += 3
	}
	switch {
	case len(e.Name) == 1 && e.Name[0] == 0 && !e.Prefix:
		return e, fmt.Errorf("unix address %q: empty abstract name", s)
	case len(e.Name) > UnixPathMax:
		return e, fmt.Errorf("unix address %q: longer than %d bytes", s, UnixPathMax)
	}
	return e, nil
}

// DNSPort is plain DNS, the one port on which a DoH endpoint is not DoH:
// the session's DNS proxy takes what is sent there.
const DNSPort = 53

var (
	zeroNet   = netip.MustParsePrefix("0.0.0.0/8")
	loopback4 = netip.AddrFrom4([4]byte{127, 0, 0, 1})
)

// Loopback returns the loopback address that ip (unmapped) counts as in
// every verdict: 127.0.0.1 for 0.0.0.0/8, ::1 for ::. Linux connects (and
// sends) to 0.0.0.0 and :: on the local host, through the loopback device,
// which is how the "0.0.0.0-day" reached local services; the rest of
// 0.0.0.0/8, reserved as "this network", is counted with it. ok is false
// for every other address.
func Loopback(ip netip.Addr) (lo netip.Addr, ok bool) {
	ip = ip.Unmap()
	switch {
	case ip.Is4() && zeroNet.Contains(ip):
		return loopback4, true
	case ip.Is6() && ip.IsUnspecified():
		return netip.IPv6Loopback(), true
	}
	return netip.Addr{}, false
}

// Reached returns the address a connect or send to ip (unmapped) reaches:
// 127.0.0.1 for 0.0.0.0, ::1 for ::, and ip itself otherwise. (A socket
// bound to another local address reaches that address instead; it is
// still this host.)
func Reached(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	if ip.IsUnspecified() {
		lo, _ := Loopback(ip)
		return lo
	}
	return ip
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
