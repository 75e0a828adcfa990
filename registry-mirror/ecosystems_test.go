package mirror

import (
	"slices"
	"testing"

	"github.com/sandtrail/sandtrail/registry-mirror/crates"
	"github.com/sandtrail/sandtrail/registry-mirror/deb"
	"github.com/sandtrail/sandtrail/registry-mirror/npm"
	"github.com/sandtrail/sandtrail/registry-mirror/oci"
	"github.com/sandtrail/sandtrail/registry-mirror/pypi"
	"github.com/sandtrail/sandtrail/resolver"
)

// TestEveryEcosystemIsServed: the mirror serves every ecosystem of the
// registry, in its order, beneath the registry's prefix with the registry's
// default upstream, and has a handler for no other.
func TestEveryEcosystemIsServed(t *testing.T) {
	if got := Names(); !slices.Equal(got, resolver.Names()) {
		t.Errorf("Names() = %q, want resolver.Names() = %q: every ecosystem needs an entry in handlers (registry-mirror/ecosystems.go)", got, resolver.Names())
	}
	for name := range handlers {
		if !resolver.Known(name) {
			t.Errorf("handlers has an entry for %q, which the registry (resolver/ecosystem) does not list", name)
		}
	}
	for _, e := range resolver.Ecosystems() {
		up, prefix, ok := Upstream(nil, e.Name())
		if !ok || up != e.DefaultUpstream() || prefix != e.MirrorPrefix() {
			t.Errorf("Upstream(nil, %s) = %q, %q, %v, want %q, %q", e.Name(), up, prefix, ok, e.DefaultUpstream(), e.MirrorPrefix())
		}
	}
	if npmPrefix != "/npm/" {
		t.Errorf("npmPrefix = %q, want /npm/", npmPrefix)
	}
}

// TestSubpackageDefaultsAreTheRegistrys: the constants the ecosystems'
// packages keep for their own use (their tests, deb's named defaults, the
// OCI protocol's root) say what the registry says.
func TestSubpackageDefaultsAreTheRegistrys(t *testing.T) {
	tests := []struct {
		eco, upstream, prefix string
	}{
		{eco: npm.Ecosystem, upstream: npm.DefaultUpstream},
		{eco: pypi.Ecosystem, upstream: pypi.DefaultUpstream},
		{eco: crates.Ecosystem, upstream: crates.DefaultUpstream},
		{eco: deb.Ecosystem, upstream: deb.Defaults[""]},
		{eco: oci.Ecosystem, upstream: oci.DefaultUpstream, prefix: oci.Prefix},
	}
	for _, tt := range tests {
		e, err := resolver.Lookup(tt.eco)
		if err != nil {
			t.Fatal(err)
		}
		if tt.upstream != e.DefaultUpstream() {
			t.Errorf("%s: the package's default upstream is %q, the registry's %q", tt.eco, tt.upstream, e.DefaultUpstream())
		}
		if tt.prefix != "" && tt.prefix != e.MirrorPrefix() {
			t.Errorf("%s: the package's prefix is %q, the registry's %q", tt.eco, tt.prefix, e.MirrorPrefix())
		}
	}
}
