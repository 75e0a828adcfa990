package mirror

import (
	"net/url"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
)

// FuzzCheckUpstream: CheckUpstream, the one check of an --upstream value,
// accepts only a key of the ecosystem list (NAME, or NAME/UPSTREAM for an
// ecosystem that takes several) and an http(s) URL with a host; what it
// accepts a mirror is built with (but for what deb.New checks itself: an
// archive's name and its option, and the policy's approval of it, which
// this empty policy never gives), what it refuses New refuses, and
// Upstream gives back what was configured.
func FuzzCheckUpstream(f *testing.F) {
	for _, s := range [][2]string{
		{"npm", "https://registry.npmjs.org/"}, {"pypi", "http://127.0.0.1:9/simple/"}, {"cargo", "https://index.crates.io/"},
		{"oci", "https://registry-1.docker.io/v2/"}, {"deb", "http://deb.debian.org/debian/"},
		{"deb/debian-security", "[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://security.debian.org/debian-security/"},
		{"npm/x", "https://registry.npmjs.org/"}, {"deb/", "http://x/"}, {"NPM", "https://r/"}, {"npm", "ftp://r/"},
		{"npm", "https:///x"}, {"npm", "registry.npmjs.org"}, {"oci", "https://u:p@r:5000/v2/v2/"}, {"deb", "[x] "},
	} {
		f.Add(s[0], s[1])
	}
	eng, err := policies.New(&policies.Policy{})
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, key, raw string) {
		checked := CheckUpstream(key, raw)
		name, sub, named := strings.Cut(key, "/")
		if checked == nil {
			if _, _, ok := Upstream(nil, name); !ok {
				t.Fatalf("CheckUpstream(%q, %q) accepted an ecosystem the mirror does not serve", key, raw)
			}
			if named && (sub == "" || name != "deb") {
				t.Fatalf("CheckUpstream(%q, %q) accepted a named upstream of %s", key, raw, name)
			}
			u := raw
			if name == "deb" && strings.HasPrefix(u, "[") {
				if _, rest, ok := strings.Cut(u, "] "); ok {
					u = strings.TrimSpace(rest)
				}
			}
			p, err := url.Parse(u)
			if err != nil || p.Scheme != "http" && p.Scheme != "https" || p.Host == "" {
				t.Fatalf("CheckUpstream(%q, %q) accepted %q, not an http(s) URL with a host", key, raw, u)
			}
			if !named {
				if got, _, _ := Upstream(map[string]string{key: raw}, key); got != raw {
					t.Fatalf("Upstream(%q=%q) = %q, want it as configured", key, raw, got)
				}
			}
		}
		_, err := New(Config{CacheDir: dir, Upstreams: map[string]string{key: raw}, Policy: eng, Emit: func(*event.Event) {}, Log: hclog.NewNullLogger()})
		switch {
		case checked != nil && err == nil:
			t.Fatalf("New with %q=%q works, but CheckUpstream refuses it: %v", key, raw, checked)
		case checked == nil && err != nil && !(name == "deb" && strings.Contains(err.Error(), "deb: deb: ")) &&
			!strings.Contains(err.Error(), "the policy approves no "+name+" registry there"):
			t.Fatalf("CheckUpstream(%q, %q) accepts it, but New refuses it: %v", key, raw, err)
		}
	})
}
