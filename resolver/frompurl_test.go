package resolver

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/resolver/purl"
)

func TestFromPurl(t *testing.T) {
	tests := []struct {
		name, in, eco, pkg, err string
	}{
		{name: "plain", in: "pkg:npm/lodash@4.17.21", eco: NPM, pkg: "lodash"},
		{name: "npm scope", in: "pkg:npm/%40babel/core@7.24.0", eco: NPM, pkg: "@babel/core"},
		{name: "npm scope without @", in: "pkg:npm/babel/core", eco: NPM, pkg: "@babel/core"},
		{name: "oci path", in: "pkg:oci/library/alpine@3.19", eco: OCI, pkg: "library/alpine"},
		{name: "oci deep path", in: "pkg:oci/a/b/c", eco: OCI, pkg: "a/b/c"},
		{name: "deb vendor is no part of the name", in: "pkg:deb/debian/curl@7.88.1-10?arch=amd64", eco: Deb, pkg: "curl"},
		{name: "deb without vendor", in: "pkg:deb/curl", eco: Deb, pkg: "curl"},
		{name: "pypi", in: "pkg:pypi/requests@2.31.0", eco: PyPI, pkg: "requests"},
		{name: "pypi namespace", in: "pkg:pypi/org/requests", err: "pypi packages have no namespace"},
		{name: "cargo namespace", in: "pkg:cargo/x/serde", err: "cargo packages have no namespace"},
		{name: "unknown", in: "pkg:nosuch/rails@7", err: "unknown ecosystem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := purl.Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			e, name, err := FromPurl(p)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("FromPurl(%s) = %v, want %q", tt.in, err, tt.err)
				}
				if tt.eco == "" && strings.Contains(tt.err, "unknown") && !errors.Is(err, ErrUnknownEcosystem) {
					t.Errorf("FromPurl(%s) = %v, want ErrUnknownEcosystem", tt.in, err)
				}
				return
			}
			if err != nil || e.Name() != tt.eco || name != tt.pkg {
				t.Fatalf("FromPurl(%s) = %v, %q, %v, want %s, %q", tt.in, e, name, err, tt.eco, tt.pkg)
			}
			// purl.Of is the inverse (but for Debian's, which adds the vendor): the name splits
			// back into the namespace and name.
			if tt.eco == Deb {
				return
			}
			back, _ := purl.Parse(purl.Of(e.Name(), name, ""))
			wantNS := p.Namespace
			if e.Namespace() == Scope && wantNS != "" {
				wantNS = "@" + strings.TrimPrefix(wantNS, "@")
			}
			if back.Namespace != wantNS || back.Name != p.Name {
				t.Errorf("purl.Of(%s, %q) = {%q %q}, want {%q %q}", e.Name(), name, back.Namespace, back.Name, wantNS, p.Name)
			}
		})
	}
}
