package mirror

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
)

// TestNamedUpstreams: an ecosystem that takes named upstreams (deb)
// accepts deb/NAME keys and serves each archive's host in HTTP-proxy
// mode; other ecosystems, and an empty name, are refused, and so is an
// upstream the policy approves nothing from (named without its secret).
func TestNamedUpstreams(t *testing.T) {
	eng, err := policies.New(policies.Default())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		upstreams map[string]string
		hosts     []string
		err       string
	}{
		{name: "defaults", hosts: []string{"deb.debian.org"}},
		{name: "named", upstreams: map[string]string{"deb": "http://deb.debian.org/debian/", "deb/debian-security": "http://security.debian.org/debian-security/"},
			hosts: []string{"deb.debian.org", "security.debian.org"}},
		{name: "npm named", upstreams: map[string]string{"npm/x": "https://registry.npmjs.org/"}, err: "unknown ecosystem"},
		{name: "empty name", upstreams: map[string]string{"deb/": "http://deb.debian.org/debian/"}, err: "unknown ecosystem"},
		{name: "unapproved", upstreams: map[string]string{"npm": "https://user:secret@npm.example.test/"}, err: "upstream npm=https://user:***@npm.example.test/: the policy approves no npm registry there"},
		{name: "approved elsewhere on the host", upstreams: map[string]string{"pypi": "https://pypi.org/other/"}, err: "approves no pypi registry"},
		{name: "bad option", upstreams: map[string]string{"deb": "[trusted=yes] http://deb.debian.org/debian/"}, err: "signed-by"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(Config{CacheDir: t.TempDir(), Upstreams: tt.upstreams, Policy: eng, Emit: func(*event.Event) {}, Log: hclog.NewNullLogger()})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("New = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range tt.hosts {
				if m.hosts[h] == nil {
					t.Errorf("host %s is not served in proxy mode (hosts %v)", h, m.hosts)
				}
			}
		})
	}
}
