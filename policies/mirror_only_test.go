package policies

import (
	"net/netip"
	"strings"
	"testing"
)

// TestRegistriesThroughMirror: the sessions' engine refuses the approved
// registries' hosts by name, looked up or connected to, with a reason
// that names the mirror; the mirror's own engine does not.
func TestRegistriesThroughMirror(t *testing.T) {
	e, err := New(Default())
	if err != nil {
		t.Fatal(err)
	}
	s := e.RegistriesThroughMirror()
	for _, host := range []string{"registry.npmjs.org", "files.pythonhosted.org", "index.crates.io", "deb.debian.org", "REGISTRY.npmjs.org."} {
		if blocked, _ := e.DomainBlocked(host); blocked {
			t.Errorf("%s: blocked by the mirror's own engine", host)
		}
		blocked, reason := s.DomainBlocked(host)
		if !blocked || !strings.Contains(reason, "only through the mirror") {
			t.Errorf("%s: DomainBlocked = %v, %q; want refused, naming the mirror", host, blocked, reason)
		}
		if !s.EgressDomain(host).Blocked {
			t.Errorf("%s: EgressDomain not blocked", host)
		}
	}
	for _, host := range []string{"example.com", "npmjs.org", "evil-registry.npmjs.org.example"} {
		if blocked, reason := s.DomainBlocked(host); blocked {
			t.Errorf("%s: blocked (%s), want only the registries' own hosts", host, reason)
		}
	}
}

// TestRegistriesThroughMirrorByAddress: a registry given by address is
// refused to sessions by that address, except on loopback, where the
// mirror itself listens; the mirror's own engine reaches both.
func TestRegistriesThroughMirrorByAddress(t *testing.T) {
	e := newTestEngine(t, "sources:\n  registries:\n    npm: [\"http://192.0.2.7/npm/\", \"http://127.0.0.1:9999/\", \"http://[2001:db8::7]:8080/\"]\n")
	s := e.RegistriesThroughMirror()
	for _, c := range []struct {
		ip      string
		blocked bool
	}{{"192.0.2.7", true}, {"::ffff:192.0.2.7", true}, {"2001:db8::7", true}, {"127.0.0.1", false}, {"192.0.2.8", false}} {
		ip := netip.MustParseAddr(c.ip)
		if d := e.Egress("", ip, 80, "tcp"); d.Verdict == Block {
			t.Errorf("%s: blocked by the mirror's own engine: %s", c.ip, d.Reason)
		}
		d := s.Egress("", ip, 80, "tcp")
		if got := d.Verdict == Block; got != c.blocked {
			t.Errorf("%s: blocked %v (%s), want %v", c.ip, got, d.Reason, c.blocked)
		}
		if c.blocked && !strings.Contains(d.Rule, "only through the mirror") {
			t.Errorf("%s: rule %q, want one naming the mirror", c.ip, d.Rule)
		}
	}
}

// TestUpstreamApproved: an upstream is approved when a registry prefix of
// its ecosystem is on its scheme and host, beneath or above its path.
func TestUpstreamApproved(t *testing.T) {
	e := newTestEngine(t, "sources:\n  registries:\n    npm: [\"https://registry.npmjs.org/\"]\n    oci: [\"https://registry-1.docker.io/v2/library/\"]\n    cargo: [\"https://index.crates.io/\"]\n")
	for _, c := range []struct {
		eco, url string
		want     bool
	}{
		{"npm", "https://registry.npmjs.org/", true},
		{"npm", "https://registry.npmjs.org", true},
		{"npm", "https://registry.npmjs.org/sub/", true},
		{"npm", "http://registry.npmjs.org/", false},
		{"npm", "https://registry.npmjs.org.evil.test/", false},
		{"pypi", "https://registry.npmjs.org/", false},
		{"oci", "https://registry-1.docker.io", true},
		{"oci", "https://registry-1.docker.io/v2/other/", false},
		{"cargo", "sparse+https://index.crates.io/", true},
		{"npm", "not a url", false},
	} {
		if got := e.UpstreamApproved(c.eco, c.url); got != c.want {
			t.Errorf("UpstreamApproved(%s, %s) = %v, want %v", c.eco, c.url, got, c.want)
		}
	}
}
