package intel

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/policies"
)

// TestGuard: a listed version is blocked by a first known_malicious check
// naming its record, whatever the policy decides, with the policy's own
// checks kept after it; anything else gets the policy's decision as is.
func TestGuard(t *testing.T) {
	eng, err := policies.New(policies.Default())
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	importPath(t, s, fixture)
	g := Guard(eng, s)
	ctx := context.Background()
	src := "https://registry.npmjs.org/x/-/x-1.0.0.tgz"
	tests := []struct {
		name    string
		req     policies.PackageRequest
		blocked bool
	}{
		{"every version", policies.PackageRequest{Ecosystem: "npm", Name: "evil-pkg", Version: "2.0.0", Source: src}, true},
		{"a listed version, upper-case ecosystem", policies.PackageRequest{Ecosystem: "NPM", Name: "@typo/colors", Version: "1.0.1", Source: src}, true},
		{"PyPI by its normal name", policies.PackageRequest{Ecosystem: "pypi", Name: "ReQeusts", Version: "2.1", Source: "https://files.pythonhosted.org/x.whl"}, true},
		{"an unlisted version", policies.PackageRequest{Ecosystem: "npm", Name: "@typo/colors", Version: "1.0.3", Source: src}, false},
		{"an unlisted name", policies.PackageRequest{Ecosystem: "npm", Name: "left-pad", Version: "1.3.0", Source: src}, false},
		{"no name (a redirect's question)", policies.PackageRequest{Ecosystem: "npm", Source: src}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := eng.Package(ctx, tt.req)
			d := g.Package(ctx, tt.req)
			if !tt.blocked {
				if !reflect.DeepEqual(d, inner) {
					t.Errorf("Package = %+v, want the policy's %+v", d, inner)
				}
				return
			}
			if d.Verdict != policies.Block || d.Rule != Rule || len(d.Checks) != len(inner.Checks)+1 || d.Checks[0].Name != Rule ||
				!strings.Contains(d.Reason, "MAL-2025-") || !reflect.DeepEqual(d.Checks[1:], inner.Checks) {
				t.Errorf("Package = %+v, want blocked by %s first, then the policy's checks %+v", d, Rule, inner.Checks)
			}
		})
	}
	if !g.UpstreamApproved("npm", "https://registry.npmjs.org/") {
		t.Errorf("the guard does not pass UpstreamApproved through")
	}
	if Guard(eng, nil) != PackagePolicy(eng) {
		t.Errorf("Guard without a store is not the policy itself")
	}
}
