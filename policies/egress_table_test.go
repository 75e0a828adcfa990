package policies

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/sandtrail/sandtrail/policies/egress"
)

// tableVerdict evaluates t the way the collector's BPF connect hooks do: it
// is the model that TestEgressTable holds against Engine.Egress.
func tableVerdict(t EgressTable, dc DomainClass, ip netip.Addr, port uint16, proto string) Verdict {
	ip = ip.Unmap()
	lo, isLo := egress.Loopback(ip)
	inAny := func(ps []netip.Prefix, a netip.Addr) bool {
		return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Contains(a) })
	}
	// An address that counts as loopback is blocked (and a DoH address)
	// when it or its loopback address is, allowed when both are.
	blocked := inAny(t.BlockedCIDRs, ip) || (isLo && inAny(t.BlockedCIDRs, lo))
	allowed := inAny(t.AllowedCIDRs, ip) && (!isLo || inAny(t.AllowedCIDRs, lo))
	doh := slices.Contains(t.DoHAddrs, ip) || (isLo && slices.Contains(t.DoHAddrs, lo))
	ports := func(rs []PortRange) bool {
		return slices.ContainsFunc(rs, func(r PortRange) bool { return r.Match(port, proto) })
	}
	switch {
	case dc.Blocked, blocked, ports(t.BlockedPorts):
		return Block
	case port != 53 && (dc.DoH || doh):
		return t.DoHAction
	}
	if t.AllowedDests || len(t.AllowedPorts) > 0 {
		dest := !t.AllowedDests || dc.Allowed || allowed
		portOK := len(t.AllowedPorts) == 0 || ports(t.AllowedPorts)
		if dest && portOK {
			return Allow
		}
	}
	return t.Default
}

func TestEgressTable(t *testing.T) {
	policies := []struct {
		name, yaml string
	}{
		{"full", egressPolicy},
		{"empty", "egress: {}\n"},
		{"ports only", "egress:\n  default: block\n  allowed_ports: [443/tcp, 53/udp]\n  doh_endpoints: [9.9.9.9]\n  doh_action: flag\n"},
		{"cidrs", "egress:\n  default: allow\n  blocked_cidrs: [\"::/0\", 127.0.0.2, \"::ffff:10.0.0.0/104\"]\n  allowed_cidrs: [127.0.0.0/8]\n  blocked_ports: [1-100/udp]\n"},
		{"loopback blocked", "egress:\n  default: allow\n  blocked_cidrs: [127.0.0.0/8, \"::1\"]\n"},
		{"loopback allowed", "egress:\n  default: block\n  allowed_cidrs: [127.0.0.1, \"::1\", 0.0.0.0/24]\n  blocked_cidrs: [0.0.0.128/25]\n  doh_endpoints: [127.0.0.1, \"::\"]\n  doh_action: flag\n"},
		{"zero net", "egress:\n  default: block\n  allowed_cidrs: [0.0.0.0/0, \"::/0\"]\n  blocked_cidrs: [0.1.0.0/16, 127.0.0.5]\n"},
	}
	domains := []string{"", "registry.npmjs.org", "api.github.com", "github.com", "evil.github.com", "dns.google", "example.com", "Registry.NPMJS.org."}
	ips := []string{"10.1.2.3", "10.6.6.6", "169.254.169.254", "::ffff:169.254.169.254", "2001:db8::1", "::1", "1.1.1.1", "9.9.9.9", "127.0.0.1", "127.0.0.2", "8.8.8.8", "::ffff:10.1.2.3",
		"0.0.0.0", "0.0.0.1", "0.0.0.200", "0.1.2.3", "0.255.255.255", "::", "::ffff:0.0.0.0", "::ffff:0.1.2.3", "::2", "127.0.0.5", "1.0.0.0"}
	ports := []uint16{0, 1, 22, 25, 53, 80, 100, 443, 853, 8000, 8443, 8050, 8100, 8101, 65535}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range policies {
		t.Run(p.name, func(t *testing.T) {
			e := newTestEngine(t, p.yaml)
			tab := e.EgressTable()
			n := 0
			for _, d := range domains {
				for _, s := range ips {
					for _, port := range ports {
						for _, proto := range []string{"tcp", "udp"} {
							ip := netip.MustParseAddr(s)
							want := e.Egress(d, ip, port, proto).Verdict
							got := tableVerdict(tab, e.EgressDomain(d), ip, port, proto)
							if got != want {
								t.Errorf("table verdict for (%q, %v, %d, %s) = %s, Egress = %s", d, ip, port, proto, got, want)
							}
							n++
						}
					}
				}
			}
			// Random addresses and ports as well.
			for range 2000 {
				var ip netip.Addr
				switch rng.IntN(3) {
				case 0:
					ip = netip.AddrFrom4([4]byte{byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))})
				case 1:
					ip = netip.AddrFrom4([4]byte{0, byte(rng.IntN(2)), byte(rng.IntN(2)), byte(rng.IntN(256))})
				default:
					var b [16]byte
					for i := range b {
						b[i] = byte(rng.IntN(256))
					}
					b[0], b[1] = 0x20, 0x01
					ip = netip.AddrFrom16(b)
				}
				port := uint16(rng.IntN(65536))
				proto := []string{"tcp", "udp"}[rng.IntN(2)]
				d := domains[rng.IntN(len(domains))]
				want := e.Egress(d, ip, port, proto).Verdict
				if got := tableVerdict(tab, e.EgressDomain(d), ip, port, proto); got != want {
					t.Errorf("table verdict for (%q, %v, %d, %s) = %s, Egress = %s", d, ip, port, proto, got, want)
				}
			}
			if n == 0 {
				t.Fatal("no cases")
			}
		})
	}
}

func TestEgressDomain(t *testing.T) {
	e := newTestEngine(t, egressPolicy)
	for _, tt := range []struct {
		domain string
		want   DomainClass
	}{
		{"", DomainClass{}},
		{"registry.npmjs.org", DomainClass{Allowed: true}},
		{"evil.github.com.", DomainClass{Blocked: true, Allowed: true}},
		{"DNS.google", DomainClass{DoH: true}},
	} {
		if got := e.EgressDomain(tt.domain); got != tt.want {
			t.Errorf("EgressDomain(%q) = %+v, want %+v", tt.domain, got, tt.want)
		}
	}
	tab := e.EgressTable()
	if got := fmt.Sprintln(tab.BlockedCIDRs, tab.DoHAddrs, tab.AllowedDests, tab.Default, tab.DoHAction); got != "[169.254.169.254/32 10.6.6.0/24] [1.1.1.1] true block block\n" {
		t.Errorf("EgressTable() = %s", got)
	}
}

func TestEgressReason(t *testing.T) {
	e := newTestEngine(t, egressPolicy)
	for _, tt := range []struct {
		name, domain, ip string
		port             uint16
		proto            string
	}{
		{"blocked domain", "evil.github.com", "10.1.2.3", 443, "tcp"},
		{"blocked address", "", "169.254.169.254", 80, "tcp"},
		{"DoH endpoint", "", "1.1.1.1", 443, "tcp"},
		{"allowed", "registry.npmjs.org", "10.1.2.3", 443, "tcp"},
		{"default", "example.com", "8.8.8.8", 25, "udp"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ip := netip.MustParseAddr(tt.ip)
			want := e.Egress(tt.domain, ip, tt.port, tt.proto).Reason
			if got := e.EgressReason(tt.domain, ip, tt.port, tt.proto); got != want || got == "" {
				t.Errorf("EgressReason(%q, %v, %d, %s) = %q, want Egress's reason %q", tt.domain, ip, tt.port, tt.proto, got, want)
			}
		})
	}
}

// TestEgressLoopbackAddr: the addresses of egress.Loopback and
// egress.Reached. (Here, not in package egress's tests, since this file is
// data the address guard knows.)
func TestEgressLoopbackAddr(t *testing.T) {
	for _, tt := range []struct {
		name, ip, lo, reached string
	}{
		{"unspecified v4", "0.0.0.0", "127.0.0.1", "127.0.0.1"},
		{"this network", "0.1.2.3", "127.0.0.1", "0.1.2.3"},
		{"top of this network", "0.255.255.255", "127.0.0.1", "0.255.255.255"},
		{"unspecified v6", "::", "::1", "::1"},
		{"mapped unspecified", "::ffff:0.0.0.0", "127.0.0.1", "127.0.0.1"},
		{"mapped this network", "::ffff:0.1.2.3", "127.0.0.1", "0.1.2.3"},
		{"loopback", "127.0.0.1", "", "127.0.0.1"},
		{"v6 loopback", "::1", "", "::1"},
		{"v4-compatible", "::0.1.2.3", "", "::1:203"},
		{"after this network", "1.0.0.0", "", "1.0.0.0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ip := netip.MustParseAddr(tt.ip)
			lo, ok := egress.Loopback(ip)
			if got := map[bool]string{true: lo.String(), false: ""}[ok]; got != tt.lo {
				t.Errorf("Loopback(%s) = %q, want %q", ip, got, tt.lo)
			}
			if got := egress.Reached(ip).String(); got != tt.reached {
				t.Errorf("Reached(%s) = %s, want %s", ip, got, tt.reached)
			}
		})
	}
}
