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

// TestNoise: bookkeeping beneath the caches (renames within them too) and
// reads of the managers' code are noise; what could hide an attack is
// not: a link or chmod anywhere, a rename into or out of a cache, a write
// of a manager's code, a scratch-like directory that is not at the root.
func TestNoise(t *testing.T) {
	for _, tt := range []struct {
		op, path, to string
		want         bool
	}{
		{"create", "/home/a/.npm/_cacache/index-v5/ab/cd", "", true},
		{"write", "/home/a/.npm/_logs/2026-debug-0.log", "", true},
		{"read", "/home/a/.cache/pip/http-v2/x", "", true},
		{"create", "/root/.cargo/registry/cache/x.crate", "", true},
		{"create", "/var/cache/apt/archives/curl.deb", "", true},
		{"create", "/tmp/pip-unpack-x/a.whl", "", true},
		{"read", "/usr/lib/node_modules/npm/lib/cli.js", "", true},
		{"write", "/usr/lib/node_modules/npm/lib/cli.js", "", false},
		{"create", "/usr/lib/python3/dist-packages/pip/x.py", "", false},
		{"delete", "/home/a/.npm/_cacache/x", "", true},
		{"rename", "/home/a/.npm/_cacache/tmp/x", "/home/a/.npm/_cacache/content-v2/y", true},
		{"rename", "/home/a/.npm/_cacache/tmp/x", "/home/a/.bashrc", false},
		{"rename", "/home/a/payload", "/home/a/.npm/_cacache/x", false},
		{"link", "/home/a/.npm/_cacache/x", "", false},
		{"rename", "/tmp/pip-x/a", "", false},
		{"chmod", "/home/a/.cache/pip/x", "", false},
		{"create", "/work/project/tmp/pip-evil/payload.sh", "", false},
		{"create", "/home/a/.npm/_npx/1/node_modules/x/index.js", "", false},
		{"create", "/home/a/webapp/node_modules/x/a.js", "", false},
		{"read", "/home/a/.npmrc", "", false},
		{"create", "/home/a/.cargo/registry/src/x/b.rs", "", false},
	} {
		if got := Noise(tt.op, tt.path, tt.to); got != tt.want {
			t.Errorf("Noise(%q, %q, %q) = %v, want %v", tt.op, tt.path, tt.to, got, tt.want)
		}
	}
}
