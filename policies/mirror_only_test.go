package policy

import (
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
