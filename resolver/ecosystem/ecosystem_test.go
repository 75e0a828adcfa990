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
