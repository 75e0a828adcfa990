package policies

import (
	"context"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// newStrictEngine loads strict.yaml with the real loader.
func newStrictEngine(t *testing.T) *Engine {
	t.Helper()
	p, err := Load("strict.yaml")
	if err != nil {
		t.Fatalf("Load(strict.yaml) = %v", err)
	}
	e, err := New(p, WithClock(func() time.Time { return testNow }))
	if err != nil {
		t.Fatalf("New(strict.yaml) = %v", err)
	}
	return e
}

// TestStrictEgress is the reachability matrix of strict.yaml: an allowed
// registry is reachable on 80 and 443 only under its name (the kernel
// knows the name only for the addresses the session's DNS proxy answered
// with), the mirror's loopback port is reachable, and everything else is
// blocked, resolvers off port 53 and DoH endpoints included.
func TestStrictEgress(t *testing.T) {
	e := newStrictEngine(t)
	reg := netip.MustParseAddr("192.0.2.10")
	named := strictAddrs(t, e)
	tests := []struct {
		name    string
		domain  string
		ip      string
		port    uint16
		proto   string
		verdict Verdict
		rule    string // the decision's rule, "" for any
	}{
		{name: "registry resolved, https", domain: "registry.npmjs.org", ip: "192.0.2.10", port: 443, proto: "tcp", verdict: Allow, rule: "egress.allowed_domains[0]"},
		{name: "registry resolved, http", domain: "deb.debian.org", ip: "192.0.2.11", port: 80, proto: "tcp", verdict: Allow, rule: "egress.allowed_domains[7]"},
		{name: "registry, name in upper case with trailing dot", domain: "PyPI.org.", ip: "192.0.2.12", port: 443, proto: "tcp", verdict: Allow, rule: "egress.allowed_domains[2]"},
		{name: "every registry host of sources is allowed", domain: "static.crates.io", ip: "2001:db8::10", port: 443, proto: "tcp", verdict: Allow},
		{name: "registry address, not resolved by the session", ip: "192.0.2.10", port: 443, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "registry on another port", domain: "registry.npmjs.org", ip: "192.0.2.10", port: 22, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "registry over udp 443 (QUIC)", domain: "registry.npmjs.org", ip: "192.0.2.10", port: 443, proto: "udp", verdict: Block, rule: "egress.default"},
		{name: "subdomain of a registry", domain: "evil.registry.npmjs.org", ip: "192.0.2.20", port: 443, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "look-alike of a registry", domain: "registry.npmjs.org.evil.example", ip: "192.0.2.20", port: 443, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "arbitrary domain", domain: "evil.example", ip: "192.0.2.20", port: 443, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "git host of sources", domain: "github.com", ip: "192.0.2.21", port: 443, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "resolver on 53 by address (the redirect takes it first)", ip: "192.0.2.53", port: 53, proto: "udp", verdict: Block, rule: "egress.default"},
		{name: "resolver on 53 over tcp", ip: "192.0.2.53", port: 53, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "resolver on 5353", ip: "192.0.2.53", port: 5353, proto: "udp", verdict: Block, rule: "egress.default"},
		{name: "resolver on 5353 over tcp", ip: "192.0.2.53", port: 5353, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "DNS over TLS", ip: "192.0.2.53", port: 853, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "DoH endpoint by name", domain: "dns.google", ip: "192.0.2.30", port: 443, proto: "tcp", verdict: Block, rule: "egress.doh_endpoints[0]"},
		{name: "DoH endpoint by address", ip: "doh4", port: 443, proto: "tcp", verdict: Block},
		{name: "DoH endpoint by IPv6 address", ip: "doh6", port: 443, proto: "tcp", verdict: Block},
		{name: "DoH endpoint on 853", ip: "doh4", port: 853, proto: "tcp", verdict: Block},
		{name: "DoH endpoint on 8443", ip: "doh4", port: 8443, proto: "tcp", verdict: Block},
		{name: "DoH endpoint address answered for a registry", domain: "registry.npmjs.org", ip: "doh4", port: 443, proto: "tcp", verdict: Block},
		{name: "DoH endpoint as plain DNS on 53", ip: "doh4", port: 53, proto: "udp", verdict: Block, rule: "egress.default"},
		{name: "mirror on loopback", ip: "127.0.0.1", port: 8484, proto: "tcp", verdict: Allow, rule: "egress.allowed_cidrs[0]"},
		{name: "mirror on IPv6 loopback", ip: "::1", port: 8484, proto: "tcp", verdict: Allow, rule: "egress.allowed_cidrs[1]"},
		{name: "mirror as localhost", domain: "localhost", ip: "127.0.0.1", port: 8484, proto: "tcp", verdict: Allow, rule: "egress.allowed_cidrs[0]"},
		{name: "other loopback service", ip: "127.0.0.1", port: 5432, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "forward proxy on loopback", ip: "127.0.0.1", port: 3128, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "loopback udp", ip: "127.0.0.1", port: 8484, proto: "udp", verdict: Block, rule: "egress.default"},
		{name: "other loopback address", ip: "127.0.0.2", port: 8484, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "0.0.0.0 reaches loopback", ip: "0.0.0.0", port: 8484, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: ":: reaches loopback", ip: "::", port: 8484, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "metadata service", ip: "metadata4", port: 80, proto: "tcp", verdict: Block, rule: "egress.blocked_cidrs[0]"},
		{name: "metadata service answered for a registry", domain: "registry.npmjs.org", ip: "metadata4", port: 80, proto: "tcp", verdict: Block, rule: "egress.blocked_cidrs[0]"},
		{name: "IPv6 metadata service", ip: "metadata6", port: 80, proto: "tcp", verdict: Block, rule: "egress.blocked_cidrs[1]"},
		{name: "another documentation address", ip: "198.51.100.7", port: 443, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "unknown address and domain", port: 443, proto: "tcp", verdict: Block, rule: "egress.default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip, ok := named[tt.ip]
			if !ok && tt.ip != "" {
				ip = netip.MustParseAddr(tt.ip)
			}
			d := e.Egress(tt.domain, ip, tt.port, tt.proto)
			if d.Verdict != tt.verdict || (tt.rule != "" && d.Rule != tt.rule) {
				t.Errorf("Egress(%q, %s, %d, %s) = %s by %q (%s), want %s by %q",
					tt.domain, tt.ip, tt.port, tt.proto, d.Verdict, d.Rule, d.Reason, tt.verdict, tt.rule)
			}
		})
	}
	// The kernel learns a class per answered address: the allowed domain's
	// class must be what EgressDomain says, or the table and Egress differ.
	if dc := e.EgressDomain("registry.npmjs.org"); !dc.Allowed || dc.Blocked || dc.DoH {
		t.Errorf("EgressDomain(registry.npmjs.org) = %+v, want allowed only", dc)
	}
	if dc := e.EgressDomain("evil.example"); dc.Allowed || dc.Blocked || dc.DoH {
		t.Errorf("EgressDomain(evil.example) = %+v, want nothing", dc)
	}
	if r := e.EgressReason("", reg, 443, "tcp"); !strings.Contains(r, "default block") {
		t.Errorf("EgressReason(\"\", %s, 443, tcp) = %q, want the default's reason", reg, r)
	}
}

// strictAddrs finds, in strict.yaml itself, the addresses of the matrix
// that are not documentation addresses (the metadata services, the DoH
// servers), so that this file names none of them: doh4, doh6, metadata4
// and metadata6.
func strictAddrs(t *testing.T, e *Engine) map[string]netip.Addr {
	t.Helper()
	m := map[string]netip.Addr{}
	for _, a := range e.EgressTable().DoHAddrs {
		k := "doh6"
		if a.Is4() {
			k = "doh4"
		}
		if _, ok := m[k]; !ok {
			m[k] = a
		}
	}
	for _, p := range e.EgressTable().BlockedCIDRs {
		k := "metadata6"
		if p.Addr().Is4() {
			k = "metadata4"
		}
		if _, ok := m[k]; !ok && p.IsSingleIP() {
			m[k] = p.Addr()
		}
	}
	if len(m) != 4 {
		t.Fatalf("strict.yaml: found %v, want an IPv4 and an IPv6 DoH address and metadata service", m)
	}
	return m
}

// TestStrictEgressTable checks what the kernel enforcer compiles from
// strict.yaml: default block, DoH blocked, loopback allowed on the
// allowed ports.
func TestStrictEgressTable(t *testing.T) {
	tab := newStrictEngine(t).EgressTable()
	if tab.Default != Block || tab.DoHAction != Block || !tab.AllowedDests {
		t.Errorf("EgressTable() default %s, doh %s, allowed dests %v; want block, block, true", tab.Default, tab.DoHAction, tab.AllowedDests)
	}
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
	if !reflect.DeepEqual(tab.AllowedCIDRs, want) {
		t.Errorf("EgressTable().AllowedCIDRs = %v, want %v", tab.AllowedCIDRs, want)
	}
	wantPorts := []PortRange{{Lo: 80, Hi: 80, Proto: "tcp"}, {Lo: 443, Hi: 443, Proto: "tcp"}, {Lo: 8484, Hi: 8484, Proto: "tcp"}}
	if !reflect.DeepEqual(tab.AllowedPorts, wantPorts) {
		t.Errorf("EgressTable().AllowedPorts = %v, want %v", tab.AllowedPorts, wantPorts)
	}
}

// TestStrictIsDefaultButEgress checks that strict.yaml differs from the
// default policy in egress alone, and that it allows every registry host
// the default's sources approve.
func TestStrictIsDefaultButEgress(t *testing.T) {
	strict, err := Load("strict.yaml")
	if err != nil {
		t.Fatalf("Load(strict.yaml) = %v", err)
	}
	def := *Default()
	s := *strict
	def.Egress, s.Egress = Egress{}, Egress{}
	if !reflect.DeepEqual(def, s) {
		t.Errorf("strict.yaml differs from default.yaml outside egress:\nstrict  %+v\ndefault %+v", s, def)
	}
	if !reflect.DeepEqual(strict.Egress.DoHEndpoints, Default().Egress.DoHEndpoints) {
		t.Errorf("strict.yaml doh_endpoints = %v, want default's %v", strict.Egress.DoHEndpoints, Default().Egress.DoHEndpoints)
	}
	e := newStrictEngine(t)
	for eco, prefixes := range Default().Sources.Registries {
		for _, raw := range prefixes {
			u, err := parsePrefix(raw)
			if err != nil {
				t.Fatalf("parsePrefix(%q) = %v", raw, err)
			}
			if !e.EgressDomain(u.host).Allowed {
				t.Errorf("%s registry %s: EgressDomain(%q) not allowed", eco, raw, u.host)
			}
		}
	}
}

// TestStrictPackage checks that strict.yaml decides packages as the
// default policy does.
func TestStrictPackage(t *testing.T) {
	strict := newStrictEngine(t)
	def, err := New(Default(), WithClock(func() time.Time { return testNow }))
	if err != nil {
		t.Fatal(err)
	}
	old := testNow.Add(-30 * 24 * time.Hour)
	tests := []struct {
		name    string
		req     PackageRequest
		verdict Verdict
	}{
		{name: "npm from the registry", req: PackageRequest{Ecosystem: "npm", Name: "left-pad", Version: "1.3.0",
			Source: "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz", Published: old}, verdict: Allow},
		{name: "npm blocklisted", req: PackageRequest{Ecosystem: "npm", Name: "event-stream", Version: "3.3.6",
			Source: "https://registry.npmjs.org/event-stream/-/event-stream-3.3.6.tgz", Published: old}, verdict: Block},
		{name: "pypi too young", req: PackageRequest{Ecosystem: "pypi", Name: "requests", Version: "2.99.0",
			Source: "https://files.pythonhosted.org/packages/ab/cd/requests-2.99.0-py3-none-any.whl", Published: testNow.Add(-time.Hour)}, verdict: Block},
		{name: "cargo from an unknown source", req: PackageRequest{Ecosystem: "cargo", Name: "serde", Version: "1.0.0",
			Source: "https://crates.evil.example/serde-1.0.0.crate", Published: old}, verdict: Block},
		{name: "npm with install scripts", req: PackageRequest{Ecosystem: "npm", Name: "esbuild", Version: "0.20.0",
			Source: "https://registry.npmjs.org/esbuild/-/esbuild-0.20.0.tgz", Published: old, InstallScripts: true}, verdict: Flag},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, want := strict.Package(context.Background(), tt.req), def.Package(context.Background(), tt.req)
			if got.Verdict != want.Verdict || got.Rule != want.Rule || got.Reason != want.Reason {
				t.Errorf("strict Package(%s) = %s by %q (%s), default's %s by %q (%s)", tt.req.Name, got.Verdict, got.Rule, got.Reason, want.Verdict, want.Rule, want.Reason)
			}
			if got.Verdict != tt.verdict {
				t.Errorf("strict Package(%s) = %s (%s), want %s", tt.req.Name, got.Verdict, got.Reason, tt.verdict)
			}
		})
	}
}
