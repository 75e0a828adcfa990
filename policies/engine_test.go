package policies

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// testPolicy exercises every rule kind.
const testPolicy = `
sources:
  registries:
    npm: [https://registry.npmjs.org/, "https://mirror.internal:8443/npm/"]
    pypi: [https://pypi.org/simple/, https://files.pythonhosted.org/packages/]
    cargo: [https://index.crates.io/]
    deb: [http://deb.debian.org/debian/]
  git_hosts: [github.com, "*.corp.example"]
  allow_direct_urls: false
on_unknown_source: block
blocklist:
  - purl: pkg:npm/event-stream@3.3.6
    reason: backdoor
  - purl: pkg:npm/lodash@<4.17.21
    reason: prototype pollution
  - purl: pkg:npm/%40evil/*
    reason: typosquats
  - purl: pkg:pypi/ctx
    reason: hijacked
  - purl: pkg:pypi/Django
    range: ">=4.0,<4.0.5"
    reason: example range
  - purl: pkg:oci/library/alpine@3.1
    reason: exact tag
cooldown:
  min_age: 2d
  action: block
  on_unknown_age: flag
  exclude: [pkg:npm/%40myorg/*, pkg:deb/*]
install_scripts: flag
`

var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newTestEngine(t *testing.T, yaml string, opts ...Option) *Engine {
	t.Helper()
	p, err := Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	e, err := New(p, append([]Option{WithClock(func() time.Time { return testNow })}, opts...)...)
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	return e
}

func TestPackage(t *testing.T) {
	e := newTestEngine(t, testPolicy)
	old := testNow.Add(-30 * 24 * time.Hour)
	npm := func(name, version string) PackageRequest {
		return PackageRequest{Ecosystem: "npm", Name: name, Version: version,
			Source:    "https://registry.npmjs.org/" + name + "/-/" + name + "-" + version + ".tgz",
			Published: old}
	}
	with := func(r PackageRequest, f func(*PackageRequest)) PackageRequest { f(&r); return r }
	tests := []struct {
		name    string
		req     PackageRequest
		verdict Verdict
		rule    string
		reason  string
	}{
		{name: "allowed", req: npm("left-pad", "1.3.0"), verdict: Allow, rule: "sources.registries.npm[0]", reason: "approved npm registry"},
		{name: "blocklisted exact version", req: npm("event-stream", "3.3.6"), verdict: Block, rule: "blocklist[0]", reason: "backdoor"},
		{name: "other version of blocklisted", req: npm("event-stream", "3.3.5"), verdict: Allow},
		{name: "blocklisted range", req: npm("lodash", "4.17.20"), verdict: Block, rule: "blocklist[1]", reason: "blocklisted (lodash versions <4.17.21)"},
		{name: "outside blocklisted range", req: npm("lodash", "4.17.21"), verdict: Allow},
		{name: "unresolved version fails closed", req: npm("lodash", ""), verdict: Block, rule: "blocklist[1]", reason: "not resolved"},
		{name: "unparseable version fails closed", req: npm("lodash", "not-a-version"), verdict: Block, rule: "blocklist[1]", reason: "cannot tell"},
		{name: "blocklisted scope glob", req: npm("@evil/lodash", "1.0.0"), verdict: Block, rule: "blocklist[2]", reason: "typosquats"},
		{name: "whole pypi package, other spelling", req: PackageRequest{Ecosystem: "pypi", Name: "CTX", Version: "0.2.6", Source: "https://files.pythonhosted.org/packages/ab/ctx-0.2.6.tar.gz", Published: old}, verdict: Block, rule: "blocklist[3]"},
		{name: "pep 440 range", req: PackageRequest{Ecosystem: "pypi", Name: "django", Version: "4.0.4", Source: "https://pypi.org/simple/django/", Published: old}, verdict: Block, rule: "blocklist[4]"},
		{name: "pep 440 outside range", req: PackageRequest{Ecosystem: "pypi", Name: "django", Version: "4.0.5", Source: "https://pypi.org/simple/django/", Published: old}, verdict: Allow},
		{name: "oci exact tag", req: PackageRequest{Ecosystem: "oci", Name: "library/alpine", Version: "3.1", Source: "https://registry-1.docker.io/v2/library/alpine", Published: old}, verdict: Block, rule: "blocklist[5]"},

		{name: "unknown registry", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Source = "https://npm.evil.example/left-pad/-/left-pad-1.3.0.tgz" }), verdict: Block, rule: "on_unknown_source", reason: "unknown source"},
		{name: "host suffix is not the host", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Source = "https://registry.npmjs.org.evil.example/left-pad" }), verdict: Block, rule: "on_unknown_source"},
		{name: "scheme must match", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Source = "http://registry.npmjs.org/left-pad" }), verdict: Block, rule: "on_unknown_source"},
		{name: "path prefix at a boundary", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Source = "https://mirror.internal:8443/npmx/left-pad" }), verdict: Block, rule: "on_unknown_source"},
		{name: "path prefix with port", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Source = "https://mirror.internal:8443/npm/left-pad" }), verdict: Allow, rule: "sources.registries.npm[1]"},
		{name: "dot-dot escapes the prefix", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Source = "https://mirror.internal:8443/npm/../evil/left-pad" }), verdict: Block, rule: "on_unknown_source"},
		{name: "registry of another ecosystem", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Source = "https://pypi.org/simple/left-pad/" }), verdict: Block, rule: "on_unknown_source"},
		{name: "no source fails closed", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Source = "" }), verdict: Block, rule: "on_unknown_source", reason: "no source URL"},
		{name: "configured registry not approved", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Registry = "https://npm.evil.example/" }), verdict: Block, rule: "on_unknown_source", reason: "registry"},
		{name: "configured registry approved", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Source = ""; r.Registry = "https://registry.npmjs.org/" }), verdict: Allow, rule: "sources.registries.npm[0]"},
		{name: "cargo sparse registry", req: PackageRequest{Ecosystem: "cargo", Name: "serde", Version: "1.0.0", Source: "sparse+https://index.crates.io/", Published: old}, verdict: Allow, rule: "sources.registries.cargo[0]"},
		{name: "git on approved host", req: with(npm("x", "1.0.0"), func(r *PackageRequest) { r.Source = "git+https://github.com/a/x.git#abc" }), verdict: Allow, rule: "sources.git_hosts[0]"},
		{name: "git scp-like", req: with(npm("x", "1.0.0"), func(r *PackageRequest) { r.Source = "git@github.com:a/x.git" }), verdict: Allow, rule: "sources.git_hosts[0]"},
		{name: "npm github shorthand", req: with(npm("x", "1.0.0"), func(r *PackageRequest) { r.Source = "github:a/x" }), verdict: Allow, rule: "sources.git_hosts[0]"},
		{name: "git wildcard host", req: with(npm("x", "1.0.0"), func(r *PackageRequest) { r.Source = "git+ssh://git@git.corp.example/a/x" }), verdict: Allow, rule: "sources.git_hosts[1]"},
		{name: "git on unknown host", req: with(npm("x", "1.0.0"), func(r *PackageRequest) { r.Source = "git+https://evil.example/a/x.git" }), verdict: Block, rule: "on_unknown_source", reason: "git host evil.example"},
		{name: "https .git is git", req: with(npm("x", "1.0.0"), func(r *PackageRequest) { r.Source = "https://gitlab.com/a/x.git" }), verdict: Block, rule: "on_unknown_source", reason: "git host gitlab.com"},
		{name: "direct URL not allowed", req: with(npm("x", "1.0.0"), func(r *PackageRequest) { r.Source = "https://example.com/x-1.0.0.tgz" }), verdict: Block, rule: "on_unknown_source", reason: "direct URLs are not allowed"},
		{name: "local file not allowed", req: with(npm("x", "1.0.0"), func(r *PackageRequest) { r.Source = "file:../x" }), verdict: Block, rule: "on_unknown_source"},

		{name: "inside cooldown", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Published = testNow.Add(-5 * time.Hour) }), verdict: Block, rule: "cooldown.min_age", reason: "inside the 2d cooldown"},
		{name: "just outside cooldown", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Published = testNow.Add(-48 * time.Hour) }), verdict: Allow},
		{name: "published in the future", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Published = testNow.Add(time.Hour) }), verdict: Block, rule: "cooldown.min_age", reason: "in the future"},
		{name: "cooldown exclusion", req: with(npm("@myorg/tool", "1.0.0"), func(r *PackageRequest) { r.Published = testNow.Add(-time.Hour) }), verdict: Allow},
		{name: "unknown publish time", req: with(npm("left-pad", "1.3.0"), func(r *PackageRequest) { r.Published = time.Time{} }), verdict: Flag, rule: "cooldown.on_unknown_age"},
		{name: "deb excluded from cooldown", req: PackageRequest{Ecosystem: "deb", Name: "curl", Version: "7.88.1-10", Source: "http://deb.debian.org/debian/pool/main/c/curl/curl_7.88.1-10_amd64.deb"}, verdict: Allow},

		{name: "install scripts flagged", req: with(npm("esbuild", "0.20.0"), func(r *PackageRequest) { r.InstallScripts = true }), verdict: Flag, rule: "install_scripts"},
		{name: "block outranks an earlier flag", req: with(npm("esbuild", "0.20.0"), func(r *PackageRequest) {
			r.InstallScripts = true
			r.Published = testNow.Add(-time.Hour)
		}), verdict: Block, rule: "cooldown.min_age"},
		{name: "first of equal verdicts decides", req: with(npm("esbuild", "0.20.0"), func(r *PackageRequest) {
			r.InstallScripts = true
			r.Published = time.Time{}
		}), verdict: Flag, rule: "cooldown.on_unknown_age"},
		{name: "blocklist decides before source", req: with(npm("event-stream", "3.3.6"), func(r *PackageRequest) { r.Source = "https://evil.example/x.tgz" }), verdict: Block, rule: "blocklist[0]"},
		{name: "empty request", req: PackageRequest{}, verdict: Block, reason: "names no ecosystem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := e.Package(context.Background(), tt.req)
			if d.Verdict != tt.verdict || (tt.rule != "" && d.Rule != tt.rule) || !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("Package(%+v) = %s %q [%s], want %s [%s] with reason containing %q\nchecks: %+v", tt.req, d.Verdict, d.Reason, d.Rule, tt.verdict, tt.rule, tt.reason, d.Checks)
			}
		})
	}
}

func TestPackageChecksInOrder(t *testing.T) {
	e := newTestEngine(t, testPolicy)
	d := e.Package(context.Background(), PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: "https://registry.npmjs.org/a"})
	var names []string
	for _, c := range d.Checks {
		names = append(names, c.Name)
	}
	if got, want := strings.Join(names, ","), "blocklist,source,cooldown,install_scripts"; got != want {
		t.Errorf("Package(...).Checks = %s, want %s", got, want)
	}
}

func TestPackageOptions(t *testing.T) {
	tests := []struct {
		name    string
		policy  string
		req     PackageRequest
		verdict Verdict
		rule    string
	}{
		{name: "unknown source flagged", policy: "on_unknown_source: flag\n",
			req: PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: "https://evil.example/a.tgz"}, verdict: Flag, rule: "on_unknown_source"},
		{name: "direct URL allowed", policy: "sources:\n  allow_direct_urls: true\n",
			req: PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: "https://example.com/a.tgz"}, verdict: Allow, rule: "sources.allow_direct_urls"},
		{name: "direct URL allowance does not approve a registry", policy: "sources:\n  allow_direct_urls: true\n",
			req: PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Registry: "https://npm.evil.example/"}, verdict: Block, rule: "on_unknown_source"},
		{name: "cooldown flags", policy: "sources:\n  allow_direct_urls: true\ncooldown:\n  min_age: 1h\n",
			req: PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: "https://example.com/a.tgz", Published: testNow.Add(-time.Minute)}, verdict: Flag, rule: "cooldown.min_age"},
		{name: "no cooldown", policy: "sources:\n  allow_direct_urls: true\n",
			req: PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: "https://example.com/a.tgz", Published: testNow}, verdict: Allow},
		{name: "provenance lost, blocked", policy: "sources:\n  allow_direct_urls: true\nprovenance_loss: block\n",
			req: PackageRequest{Ecosystem: "npm", Name: "nx", Version: "21.5.0", Source: "https://example.com/nx.tgz", ProvenanceLost: true}, verdict: Block, rule: "provenance_loss"},
		{name: "provenance lost, default allows", policy: "sources:\n  allow_direct_urls: true\n",
			req: PackageRequest{Ecosystem: "npm", Name: "nx", Version: "21.5.0", Source: "https://example.com/nx.tgz", ProvenanceLost: true}, verdict: Allow, rule: "sources.allow_direct_urls"},
		{name: "install scripts blocked", policy: "sources:\n  allow_direct_urls: true\ninstall_scripts: block\n",
			req: PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: "https://example.com/a.tgz", InstallScripts: true}, verdict: Block, rule: "install_scripts"},
		{name: "install scripts allowed by default", policy: "sources:\n  allow_direct_urls: true\n",
			req: PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: "https://example.com/a.tgz", InstallScripts: true}, verdict: Allow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEngine(t, tt.policy)
			d := e.Package(context.Background(), tt.req)
			if d.Verdict != tt.verdict || (tt.rule != "" && d.Rule != tt.rule) {
				t.Errorf("Package(%+v) = %s %q [%s], want %s [%s]", tt.req, d.Verdict, d.Reason, d.Rule, tt.verdict, tt.rule)
			}
		})
	}
}

const egressPolicy = `
egress:
  default: block
  allowed_domains: [registry.npmjs.org, "*.github.com"]
  blocked_domains: [evil.github.com]
  allowed_cidrs: [10.0.0.0/8, "2001:db8::/32"]
  blocked_cidrs: [169.254.169.254, 10.6.6.0/24]
  allowed_ports: [443, 80/tcp, 8000-8100]
  blocked_ports: [25]
  doh_endpoints: [dns.google, 1.1.1.1]
  doh_action: block
`

func TestEgress(t *testing.T) {
	e := newTestEngine(t, egressPolicy)
	addr := netip.MustParseAddr
	tests := []struct {
		name    string
		domain  string
		ip      netip.Addr
		port    uint16
		proto   string
		verdict Verdict
		rule    string
	}{
		{name: "allowed domain", domain: "registry.npmjs.org", port: 443, proto: "tcp", verdict: Allow, rule: "egress.allowed_domains[0]"},
		{name: "domain case and trailing dot", domain: "Registry.NPMJS.org.", port: 443, proto: "tcp", verdict: Allow, rule: "egress.allowed_domains[0]"},
		{name: "wildcard subdomain", domain: "api.github.com", port: 443, proto: "tcp", verdict: Allow, rule: "egress.allowed_domains[1]"},
		{name: "wildcard excludes the apex", domain: "github.com", port: 443, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "blocked beats allowed", domain: "evil.github.com", port: 443, proto: "tcp", verdict: Block, rule: "egress.blocked_domains[0]"},
		{name: "allowed CIDR", ip: addr("10.1.2.3"), port: 8080, proto: "tcp", verdict: Allow, rule: "egress.allowed_cidrs[0]"},
		{name: "blocked CIDR inside allowed", ip: addr("10.6.6.6"), port: 443, proto: "tcp", verdict: Block, rule: "egress.blocked_cidrs[1]"},
		{name: "metadata address", ip: addr("169.254.169.254"), port: 80, proto: "tcp", verdict: Block, rule: "egress.blocked_cidrs[0]"},
		{name: "v4-mapped address", ip: addr("::ffff:169.254.169.254"), port: 80, proto: "tcp", verdict: Block, rule: "egress.blocked_cidrs[0]"},
		{name: "ipv6 CIDR", ip: addr("2001:db8::1"), port: 443, proto: "tcp", verdict: Allow, rule: "egress.allowed_cidrs[1]"},
		{name: "allowed destination on other port", domain: "registry.npmjs.org", port: 22, proto: "tcp", verdict: Block, rule: "egress.default"},
		{name: "port with protocol", domain: "registry.npmjs.org", port: 80, proto: "udp", verdict: Block, rule: "egress.default"},
		{name: "port range", domain: "registry.npmjs.org", port: 8050, proto: "udp", verdict: Allow},
		{name: "blocked port", domain: "registry.npmjs.org", port: 25, proto: "tcp", verdict: Block, rule: "egress.blocked_ports[0]"},
		{name: "doh by name", domain: "dns.google", ip: addr("8.8.8.8"), port: 443, proto: "tcp", verdict: Block, rule: "egress.doh_endpoints[0]"},
		{name: "doh by address", ip: addr("1.1.1.1"), port: 443, proto: "tcp", verdict: Block, rule: "egress.doh_endpoints[1]"},
		{name: "doh by name on another port", domain: "dns.google", ip: addr("8.8.8.8"), port: 8443, proto: "tcp", verdict: Block, rule: "egress.doh_endpoints[0]"},
		{name: "doh by address on another port", ip: addr("1.1.1.1"), port: 8443, proto: "tcp", verdict: Block, rule: "egress.doh_endpoints[1]"},
		{name: "doh by address on an allowed port", ip: addr("1.1.1.1"), port: 8050, proto: "udp", verdict: Block, rule: "egress.doh_endpoints[1]"},
		{name: "plain dns to a doh address is not doh", ip: addr("1.1.1.1"), port: 53, proto: "udp", verdict: Block, rule: "egress.default"},
		{name: "unknown destination", domain: "example.com", ip: addr("93.184.216.34"), port: 443, proto: "tcp", verdict: Block, rule: "egress.default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := e.Egress(tt.domain, tt.ip, tt.port, tt.proto)
			if d.Verdict != tt.verdict || (tt.rule != "" && d.Rule != tt.rule) {
				t.Errorf("Egress(%q, %v, %d, %s) = %s %q [%s], want %s [%s]", tt.domain, tt.ip, tt.port, tt.proto, d.Verdict, d.Reason, d.Rule, tt.verdict, tt.rule)
			}
		})
	}
}

// TestEgressLoopback: 0.0.0.0/8, :: and ::ffff:0.0.0.0 count as loopback,
// which Linux connects them to: blocked with it, allowed only with it.
func TestEgressLoopback(t *testing.T) {
	blocked := newTestEngine(t, "egress:\n  default: allow\n  blocked_cidrs: [127.0.0.0/8, \"::1\"]\n")
	allowed := newTestEngine(t, "egress:\n  default: block\n  allowed_cidrs: [127.0.0.0/8, \"::1\", 0.0.0.0/32]\n")
	doh := newTestEngine(t, "egress:\n  doh_endpoints: [127.0.0.1]\n  doh_action: flag\n")
	addr := netip.MustParseAddr
	tests := []struct {
		name    string
		e       *Engine
		ip      netip.Addr
		port    uint16
		verdict Verdict
		rule    string
		reason  string
	}{
		{"unspecified v4", blocked, addr("0.0.0.0"), 8080, Block, "egress.blocked_cidrs[0]", "0.0.0.0 (reaches loopback 127.0.0.1) port 8080/tcp: address is in blocked 127.0.0.0/8"},
		{"this network", blocked, addr("0.1.2.3"), 8080, Block, "egress.blocked_cidrs[0]", "0.1.2.3 (counted as loopback 127.0.0.1) port 8080/tcp: address is in blocked 127.0.0.0/8"},
		{"unspecified v6", blocked, addr("::"), 8080, Block, "egress.blocked_cidrs[1]", ":: (reaches loopback ::1) port 8080/tcp: address is in blocked ::1/128"},
		{"mapped unspecified", blocked, addr("::ffff:0.0.0.0"), 8080, Block, "egress.blocked_cidrs[0]", "0.0.0.0 (reaches loopback 127.0.0.1) port 8080/tcp: address is in blocked 127.0.0.0/8"},
		{"other address", blocked, addr("1.0.0.0"), 8080, Allow, "egress.default", ""},
		{"allowed when both are", allowed, addr("0.0.0.0"), 8080, Allow, "egress.allowed_cidrs[2]", ""},
		{"not allowed as loopback alone", allowed, addr("0.1.2.3"), 8080, Block, "egress.default", ""},
		{"v6 not allowed as loopback alone", allowed, addr("::"), 8080, Block, "egress.default", ""},
		{"doh as its loopback address", doh, addr("0.0.0.0"), 8443, Flag, "egress.doh_endpoints[0]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.e.Egress("", tt.ip, tt.port, "tcp")
			if d.Verdict != tt.verdict || d.Rule != tt.rule || (tt.reason != "" && d.Reason != tt.reason) {
				t.Errorf("Egress(%v, %d) = %s %q [%s], want %s %q [%s]", tt.ip, tt.port, d.Verdict, d.Reason, d.Rule, tt.verdict, tt.reason, tt.rule)
			}
		})
	}
}

func TestEgressDefaultAllow(t *testing.T) {
	e := newTestEngine(t, "")
	if d := e.Egress("example.com", netip.Addr{}, 443, "tcp"); d.Verdict != Allow || d.Rule != "egress.default" {
		t.Errorf("Egress with an empty policy = %s [%s], want allow [egress.default]", d.Verdict, d.Rule)
	}
}

func TestFiles(t *testing.T) {
	const fp = `
files:
  sensitive_read: [/etc, ~/.ssh, ~/.docker/config.json, /var/run/secrets]
  read_exceptions: [/etc/ssl, /etc/ld.so.cache]
  protected_write: [/usr, ~/.bashrc]
`
	withHome := newTestEngine(t, fp, WithHome("/home/agent"))
	anyHome := newTestEngine(t, fp)
	tests := []struct {
		name    string
		e       *Engine
		write   bool
		path    string
		verdict Verdict
		rule    string
	}{
		{name: "sensitive read", e: withHome, path: "/etc/shadow", verdict: Flag, rule: "files.sensitive_read[0]"},
		{name: "the prefix itself", e: withHome, path: "/etc", verdict: Flag, rule: "files.sensitive_read[0]"},
		{name: "component boundary", e: withHome, path: "/etcetera/x", verdict: Allow},
		{name: "read exception", e: withHome, path: "/etc/ssl/certs/ca.pem", verdict: Allow, rule: "files.read_exceptions[0]"},
		{name: "dot-dot out of an exception", e: withHome, path: "/etc/ssl/../shadow", verdict: Flag, rule: "files.sensitive_read[0]"},
		{name: "home expanded", e: withHome, path: "/home/agent/.ssh/id_ed25519", verdict: Flag, rule: "files.sensitive_read[1]"},
		{name: "other home with home set", e: withHome, path: "/home/bob/.ssh/id_ed25519", verdict: Allow},
		{name: "file prefix", e: withHome, path: "/home/agent/.docker/config.json", verdict: Flag, rule: "files.sensitive_read[2]"},
		{name: "any home without WithHome", e: anyHome, path: "/home/bob/.ssh/id_rsa", verdict: Flag, rule: "files.sensitive_read[1]"},
		{name: "root home without WithHome", e: anyHome, path: "/root/.ssh/authorized_keys", verdict: Flag, rule: "files.sensitive_read[1]"},
		{name: "relative read fails closed", e: withHome, path: ".ssh/id_rsa", verdict: Flag, rule: "files.sensitive_read_action"},
		{name: "ordinary read", e: withHome, path: "/home/agent/project/main.go", verdict: Allow},
		{name: "protected write", e: withHome, write: true, path: "/usr/local/bin/npm", verdict: Block, rule: "files.protected_write[0]"},
		{name: "protected home file", e: withHome, write: true, path: "/home/agent/.bashrc", verdict: Block, rule: "files.protected_write[1]"},
		{name: "ordinary write", e: withHome, write: true, path: "/home/agent/project/out.txt", verdict: Allow},
		{name: "sensitive read is not a protected write", e: withHome, write: true, path: "/etc/hosts", verdict: Allow},
		{name: "relative write fails closed", e: withHome, write: true, path: "x", verdict: Block, rule: "files.protected_write_action"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn, d := "FileRead", Decision{}
			if tt.write {
				fn, d = "FileWrite", tt.e.FileWrite(tt.path)
			} else {
				d = tt.e.FileRead(tt.path)
			}
			if d.Verdict != tt.verdict || (tt.rule != "" && d.Rule != tt.rule) {
				t.Errorf("%s(%q) = %s %q [%s], want %s [%s]", fn, tt.path, d.Verdict, d.Reason, d.Rule, tt.verdict, tt.rule)
			}
		})
	}
}

func TestSensitiveReads(t *testing.T) {
	const fp = `
files:
  sensitive_read: [/etc, ~/.ssh, "~", /var/run/secrets/]
  read_exceptions: [/etc/ssl, ~/.ssh/known_hosts]
`
	for _, c := range []struct {
		name      string
		e         *Engine
		home      string
		sens, exc []string
	}{
		{name: "no home", e: newTestEngine(t, fp), sens: []string{"/etc", "/var/run/secrets"}, exc: []string{"/etc/ssl"}},
		{name: "home given", e: newTestEngine(t, fp), home: "/w/s1/", sens: []string{"/etc", "/w/s1/.ssh", "/w/s1", "/var/run/secrets"}, exc: []string{"/etc/ssl", "/w/s1/.ssh/known_hosts"}},
		{name: "engine's home", e: newTestEngine(t, fp, WithHome("/home/agent")), sens: []string{"/etc", "/home/agent/.ssh", "/home/agent", "/var/run/secrets"}, exc: []string{"/etc/ssl", "/home/agent/.ssh/known_hosts"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sens, exc := c.e.SensitiveReads(c.home)
			if !slices.Equal(sens, c.sens) || !slices.Equal(exc, c.exc) {
				t.Errorf("SensitiveReads(%q) = %q, %q, want %q, %q", c.home, sens, exc, c.sens, c.exc)
			}
		})
	}
}

func TestAgentUID0(t *testing.T) {
	tests := []struct {
		name    string
		policy  string
		uid     uint32
		verdict Verdict
	}{
		{name: "default alerts", policy: "", uid: 0, verdict: Flag},
		{name: "alert", policy: "agent_uid0: alert\n", uid: 0, verdict: Flag},
		{name: "allow", policy: "agent_uid0: allow\n", uid: 0, verdict: Allow},
		{name: "unprivileged", policy: "agent_uid0: alert\n", uid: 1000, verdict: Allow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := newTestEngine(t, tt.policy).AgentUID0(tt.uid); d.Verdict != tt.verdict {
				t.Errorf("AgentUID0(%d) = %s, want %s", tt.uid, d.Verdict, tt.verdict)
			}
		})
	}
}

func TestSeccompAllow(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		want   []string
	}{
		{name: "default refuses all", policy: "", want: nil},
		{name: "io_uring", policy: "sandbox: {seccomp: {allow: [io_uring]}}\n", want: []string{"io_uring"}},
		{name: "two", policy: "sandbox:\n  seccomp:\n    allow: [user_namespaces, bpf]\n", want: []string{"user_namespaces", "bpf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := newTestEngine(t, tt.policy).SeccompAllow(); !slices.Equal(got, tt.want) {
				t.Errorf("SeccompAllow() = %q, want %q", got, tt.want)
			}
		})
	}
	_, err := Parse("p.yaml", []byte("sandbox: {seccomp: {allow: [io_uring, ptrace]}}\n"))
	if err == nil || !strings.Contains(err.Error(), "sandbox.seccomp.allow[1]") {
		t.Errorf("Parse(allow ptrace) = %v, want an error at sandbox.seccomp.allow[1]", err)
	}
}

func TestRequire(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		want   []string
	}{
		{name: "default requires nothing more", policy: "", want: nil},
		{name: "two", policy: "require: [unix_enforce, clone3_kill]\n", want: []string{"unix_enforce", "clone3_kill"}},
		{name: "a required one", policy: "require: [btf]\n", want: []string{"btf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := newTestEngine(t, tt.policy).Require(); !slices.Equal(got, tt.want) {
				t.Errorf("Require() = %q, want %q", got, tt.want)
			}
		})
	}
	if got := Default().Require; len(got) != 0 {
		t.Errorf("Default().Require = %q, want empty", got)
	}
	_, err := Parse("p.yaml", []byte("require:\n  - unix_enforce\n  - unix_enforc\n"))
	want := `p.yaml:3: require[1]: unknown capability "unix_enforc" (want one of ` + strings.Join(event.Capabilities, ", ") + ")"
	if err == nil || err.Error() != want {
		t.Errorf("Parse(require unix_enforc) = %v, want %s", err, want)
	}
}

func TestToolIO(t *testing.T) {
	r := "age186w5azxwycw5zp5skp77slvsmf7jmcftw2mm7rlp4hwqer4yjdtqexgnh2"
	e := newTestEngine(t, "tool_io:\n  verbosity: full\n  recipients: ["+r+"]\n")
	got := e.ToolIO()
	if got.Verbosity != VerbosityFull || len(got.Recipients) != 1 || got.Recipients[0] != r {
		t.Errorf("ToolIO() = %+v, want full sealed to %s", got, r)
	}
	got.Recipients[0] = "changed"
	if e.ToolIO().Recipients[0] != r {
		t.Errorf("ToolIO() shares its recipients with the caller")
	}
	if v := newTestEngine(t, "").ToolIO().Verbosity; v != VerbosityNames {
		t.Errorf("ToolIO().Verbosity of an empty policy = %q, want names", v)
	}
}

func TestToolVerbosityAndRefuse(t *testing.T) {
	r := "age186w5azxwycw5zp5skp77slvsmf7jmcftw2mm7rlp4hwqer4yjdtqexgnh2"
	e := newTestEngine(t, `tool_io:
  verbosity: summaries
  recipients: [`+r+`]
  tools:
    - {match: "fs_read*", verbosity: names}
    - {match: "fs_*", verbosity: full}
    - {match: bash, verbosity: full}
  refuse: ["shell_*", "delete_repo"]
`)
	for name, want := range map[string]string{"fs_read_file": VerbosityNames, "fs_write": VerbosityFull, "bash": VerbosityFull, "bash2": VerbositySummaries, "model": VerbositySummaries} {
		if got := e.ToolVerbosity(name); got != want {
			t.Errorf("ToolVerbosity(%q) = %q, want %q (first match wins)", name, got, want)
		}
	}
	for name, want := range map[string]bool{"shell_exec": true, "delete_repo": true, "delete_repos": false, "echo": false} {
		if _, got := e.ToolRefused(name); got != want {
			t.Errorf("ToolRefused(%q) = %v, want %v", name, got, want)
		}
	}
	// A per-tool full needs recipients too; a bad glob is named.
	for _, bad := range []struct{ yaml, want string }{
		{"tool_io:\n  tools: [{match: bash, verbosity: full}]\n", "full needs at least one age recipient"},
		{"tool_io:\n  tools: [{match: \"[\", verbosity: names}]\n", "tool_io.tools[0].match"},
		{"tool_io:\n  tools: [{match: bash}]\n", "tool_io.tools[0].verbosity: missing"},
		{"tool_io:\n  tools: [{match: bash, verbosity: loud}]\n", "tool_io.tools[0].verbosity: invalid value"},
		{"tool_io:\n  refuse: [\"\"]\n", "tool_io.refuse[0]: empty glob"},
		// age parses recipients: a checksum error and an SSH key it cannot take.
		{"tool_io:\n  verbosity: full\n  recipients: [age186w5azxwycw5zp5skp77slvsmf7jmcftw2mm7rlp4hwqer4yjdtqexgnh3]\n", "tool_io.recipients[0]"},
		{"tool_io:\n  verbosity: full\n  recipients: [\"ssh-ed25519 AAAA\"]\n", "tool_io.recipients[0]"},
	} {
		p, err := Parse("t.yaml", []byte(bad.yaml))
		if err == nil {
			_, err = New(p)
		}
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("policy %q: error %v, want %q", bad.yaml, err, bad.want)
		}
	}
}

func TestNewRejectsInvalid(t *testing.T) {
	if _, err := New(&Policy{InstallScripts: "sometimes"}); err == nil || !strings.Contains(err.Error(), "install_scripts") {
		t.Errorf("New(invalid) = %v, want an error naming install_scripts", err)
	}
	if _, err := New(nil); err == nil {
		t.Errorf("New(nil) = nil error, want one")
	}
}

func FuzzPackage(f *testing.F) {
	f.Add("npm", "lodash", "4.17.20", "https://registry.npmjs.org/lodash", "git@github.com:a/b")
	f.Add("pypi", "Django", "4.0.4", "sparse+https://x/", "github:a/b")
	f.Add("oci", "library/alpine", "3.1", "file:x", "%zz://")
	p, err := Parse("test.yaml", []byte(testPolicy))
	if err != nil {
		f.Fatal(err)
	}
	e, err := New(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, eco, name, version, source, registry string) {
		d := e.Package(context.Background(), PackageRequest{Ecosystem: eco, Name: name, Version: version, Source: source, Registry: registry})
		if d.Verdict != Allow && d.Verdict != Flag && d.Verdict != Block {
			t.Fatalf("Package = verdict %q", d.Verdict)
		}
		if d.Reason == "" {
			t.Fatalf("Package = %+v, want a reason", d)
		}
	})
}

// TestBlocklistOrder checks that exact and glob entries are tried in list
// order, whichever index finds them.
func TestBlocklistOrder(t *testing.T) {
	const pol = `
sources: {allow_direct_urls: true}
blocklist:
  - {purl: "pkg:npm/a@<1", reason: exact first}
  - {purl: "pkg:npm/a*", reason: glob second}
  - {purl: "pkg:npm/b*@>=2", reason: glob third}
  - {purl: "pkg:npm/b", reason: exact fourth}
`
	e := newTestEngine(t, pol)
	tests := []struct {
		name, pkg, version, rule string
	}{
		{"exact before glob", "a", "0.5.0", "blocklist[0]"},
		{"glob when exact range misses", "a", "2.0.0", "blocklist[1]"},
		{"glob before exact", "b", "2.0.0", "blocklist[2]"},
		{"exact when glob range misses", "b", "1.0.0", "blocklist[3]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := e.Package(context.Background(), PackageRequest{Ecosystem: "npm", Name: tt.pkg, Version: tt.version, Source: "file:x"})
			if d.Verdict != Block || d.Rule != tt.rule {
				t.Errorf("Package(%s@%s) = %s [%s], want block [%s]", tt.pkg, tt.version, d.Verdict, d.Rule, tt.rule)
			}
		})
	}
}

// TestEngineConcurrent runs decisions from many goroutines on one engine;
// run with -race it checks that an Engine is safe for concurrent use.
func TestEngineConcurrent(t *testing.T) {
	e := newTestEngine(t, testPolicy)
	done := make(chan Verdict)
	for i := 0; i < 8; i++ {
		go func(i int) {
			v := Block
			for j := 0; j < 200; j++ {
				d := e.Package(context.Background(), PackageRequest{Ecosystem: "npm", Name: "lodash", Version: "4.17.20",
					Source: "https://registry.npmjs.org/lodash/-/lodash-4.17.20.tgz", Published: testNow.Add(-time.Duration(j) * time.Hour)})
				if d.Verdict != Block {
					v = d.Verdict
				}
				e.Egress("example.com", netip.MustParseAddr("10.0.0.1"), uint16(i), "tcp")
				e.FileRead("/etc/shadow")
			}
			done <- v
		}(i)
	}
	for i := 0; i < 8; i++ {
		if v := <-done; v != Block {
			t.Errorf("concurrent Package(lodash@4.17.20) = %s, want block", v)
		}
	}
}

// TestSourceReasonRedacted checks that credentials in a registry or source
// URL do not reach a decision's reason.
func TestSourceReasonRedacted(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		req    PackageRequest
		secret string
	}{
		{name: "unapproved registry password", policy: "on_unknown_source: flag\n",
			req:    PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Registry: "https://bob:hunter2secret@npm.evil.example/"},
			secret: "hunter2secret"},
		{name: "direct source token parameter", policy: "sources:\n  allow_direct_urls: true\n",
			req:    PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: "https://example.com/a.tgz?access_token=tok3nvalue42"},
			secret: "tok3nvalue42"},
		{name: "unknown source password", policy: "on_unknown_source: flag\n",
			req:    PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: "https://u:pa55word99@evil.example/a.tgz"},
			secret: "pa55word99"},
		{name: "approved registry password", policy: "",
			req:    PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: "https://u:pa55word99@registry.npmjs.org/a/-/a-1.0.0.tgz"},
			secret: "pa55word99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEngine(t, tt.policy)
			d := e.Package(context.Background(), tt.req)
			for _, c := range d.Checks {
				if c.Name != "source" {
					continue
				}
				if strings.Contains(c.Reason, tt.secret) || !strings.Contains(c.Reason, event.Mask) {
					t.Errorf("Package(%+v) source reason = %q, want %q masked as %s", tt.req, c.Reason, tt.secret, event.Mask)
				}
				return
			}
			t.Fatalf("Package(%+v) = %+v, want a source check", tt.req, d)
		})
	}
}

func TestPreInstall(t *testing.T) {
	e := newTestEngine(t, testPolicy)
	old := testNow.Add(-30 * 24 * time.Hour)
	reg := "https://registry.npmjs.org/"
	tests := []struct {
		name    string
		req     PackageRequest
		verdict Verdict
		rule    string
	}{
		{"registry package, unpinned", PackageRequest{Ecosystem: "npm", Name: "left-pad", Requested: "^1.3.0", Registry: reg}, Allow, "sources.registries.npm[0]"},
		{"whole package blocklisted", PackageRequest{Ecosystem: "pypi", Name: "ctx", Registry: "https://pypi.org/simple/"}, Block, "blocklist[3]"},
		{"blocklisted range, unpinned: the mirror hides it", PackageRequest{Ecosystem: "npm", Name: "lodash", Requested: "^4", Registry: reg}, Allow, "sources.registries.npm[0]"},
		{"blocklisted range, pinned", PackageRequest{Ecosystem: "npm", Name: "lodash", Version: "4.17.20", Registry: reg, Published: old}, Block, "blocklist[1]"},
		{"pinned inside the cooldown", PackageRequest{Ecosystem: "npm", Name: "left-pad", Version: "1.3.0", Registry: reg, Published: testNow.Add(-time.Hour)}, Block, "cooldown.min_age"},
		{"pinned, publish time unknown", PackageRequest{Ecosystem: "npm", Name: "left-pad", Version: "1.3.0", Registry: reg}, Flag, "cooldown.on_unknown_age"},
		{"unpinned: no cooldown check", PackageRequest{Ecosystem: "npm", Name: "left-pad", Registry: reg}, Allow, "sources.registries.npm[0]"},
		{"direct URL without a name", PackageRequest{Ecosystem: "pypi", Source: "https://example.invalid/x.whl"}, Block, "on_unknown_source"},
		{"git URL", PackageRequest{Ecosystem: "npm", Source: "git+https://example.invalid/x.git"}, Block, "on_unknown_source"},
		{"an apt pattern", PackageRequest{Ecosystem: "deb", Source: "apt-pattern:netcat-trad*"}, Block, "on_unknown_source"},
		{"extra index not approved", PackageRequest{Ecosystem: "pypi", Registry: "https://pypi.example.invalid/simple/"}, Block, "on_unknown_source"},
		{"nothing named", PackageRequest{Ecosystem: "npm"}, Block, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := e.PreInstall(context.Background(), tt.req)
			if d.Verdict != tt.verdict || d.Rule != tt.rule {
				t.Errorf("PreInstall(%+v) = %s by %q (%s), want %s by %q", tt.req, d.Verdict, d.Rule, d.Reason, tt.verdict, tt.rule)
			}
		})
	}
}
