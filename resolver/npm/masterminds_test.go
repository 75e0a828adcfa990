package npm

import (
	"testing"

	"github.com/Masterminds/semver/v3"
)

// TestMastermindsDifferences proves each difference between Masterminds/semver/v3 constraints
// and node-semver (in npm's loose mode) that docs/resolver.md lists. Both sides are computed, so
// the test fails if either library changes.
func TestMastermindsDifferences(t *testing.T) {
	const bad = "error"
	tests := []struct {
		name, rng, version string
		masterminds, npm   string // "true", "false" or "error"
	}{
		{"prerelease on another tuple (caret)", "^1.2.3-beta.1", "1.2.4-beta.1", "true", "false"},
		{"prerelease on another tuple (>=)", ">=1.2.3-beta.1", "1.3.0-alpha", "true", "false"},
		{"prerelease on another tuple (tilde)", "~1.2.3-beta", "1.2.4-beta", "true", "false"},
		{"comma is AND in Masterminds, dropped by npm's loose parse", ">=1.0.0, <2.0.0", "0.5.0", "false", "true"},
		{"not-equal exists only in Masterminds", "!=1.2.3", "1.2.4", "true", bad},
		{"loose prerelease without dash", "1.2.3beta", "1.2.3-beta", bad, "true"},
		{"partial version is a version in Masterminds", "^1.2.3", "1.2", "false", bad},
		{"numbers above 2^53-1", ">=1.0.0", "9007199254740992.0.0", "true", bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mm := bad
			c, err := semver.NewConstraint(tt.rng)
			v, verr := semver.NewVersion(tt.version)
			if err == nil && verr == nil {
				mm = boolString(c.Check(v))
			}
			if mm != tt.masterminds {
				t.Errorf("Masterminds %q.Check(%q) = %s, want %s", tt.rng, tt.version, mm, tt.masterminds)
			}
			got := bad
			r, rerr := ParseRange(tt.rng, NPM)
			nv, nerr := ParseVersion(tt.version, NPM)
			if rerr == nil && nerr == nil {
				got = boolString(r.Test(nv))
			}
			if got != tt.npm {
				t.Errorf("ParseRange(%q).Test(%q) = %s, want %s", tt.rng, tt.version, got, tt.npm)
			}
		})
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
