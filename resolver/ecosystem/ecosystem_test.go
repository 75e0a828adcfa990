package ecosystem

import "testing"

func TestFromOSV(t *testing.T) {
	tests := []struct {
		name, osv, want string
		ok              bool
	}{
		{"npm", "npm", NPM, true},
		{"PyPI", "PyPI", PyPI, true},
		{"crates.io", "crates.io", Cargo, true},
		{"Debian", "Debian", Deb, true},
		{"Debian with a release", "Debian:12", Deb, true},
		{"names are case-sensitive", "pypi", "", false},
		{"RubyGems", "RubyGems", "", false},
		{"OCI has none", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := FromOSV(tt.osv)
			if ok != tt.ok || got.Name != tt.want {
				t.Errorf("FromOSV(%q) = %q, %v; want %q, %v", tt.osv, got.Name, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestInCache(t *testing.T) {
	for path, want := range map[string]bool{
		"/home/a/.npm/_cacache/index-v5/ab/cd": true,
		"/home/a/.npm/_logs/2026-debug-0.log":  true,
		"/home/a/.cache/pip/http-v2/x":         true,
		"/root/.cargo/registry/cache/x.crate":  true,
		"/var/cache/apt/archives/curl.deb":     true,
		"/home/a/webapp/node_modules/x/a.js":   false,
		"/home/a/.npmrc":                       false,
		"/home/a/.cargo/registry/src/x/b.rs":   false,
		"/home/a/.aws/credentials":             false,
		"/tmp/pip-unpack-x/a.whl":              true,
		"/tmp/pipx/a":                          false,
	} {
		if got := InCache(path); got != want {
			t.Errorf("InCache(%q) = %v, want %v", path, got, want)
		}
	}
}
