package cargo

import (
	"testing"

	"github.com/Masterminds/semver/v3"
)

// TestMastermindsDifferences proves each difference between Masterminds/semver/v3 constraints
// and Cargo's requirements that docs/resolver.md lists. Both sides are computed, so the test fails
// if either changes.
func TestMastermindsDifferences(t *testing.T) {
	const bad = "error"
	tests := []struct {
		name, req, version string
		masterminds, cargo string // "true", "false" or "error"
	}{
		{"bare version is caret in Cargo, exact in Masterminds", "1.2.3", "1.5.0", "false", "true"},
		{"prerelease on another tuple (>=)", ">=1.0.0-alpha", "1.0.1-alpha", "true", "false"},
		{"prerelease on another tuple (tilde)", "~1.2.3-beta", "1.2.4-beta", "true", "false"},
		{"no || in Cargo", "1.0 || 2.0", "2.0.0", "true", bad},
		{"no hyphen ranges in Cargo", "1.2.3 - 2.0.0", "1.5.0", "true", bad},
		{"no v prefix in Cargo", "v1.2.3", "1.2.3", "true", bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mm := bad
			c, err := semver.NewConstraint(tt.req)
			v, verr := semver.NewVersion(tt.version)
			if err == nil && verr == nil {
				mm = boolString(c.Check(v))
			}
			if mm != tt.masterminds {
				t.Errorf("Masterminds %q.Check(%q) = %s, want %s", tt.req, tt.version, mm, tt.masterminds)
			}
			got := bad
			r, rerr := ParseReq(tt.req)
			cv, cerr := ParseVersion(tt.version)
			if rerr == nil && cerr == nil {
				got = boolString(r.Match(cv))
			}
			if got != tt.cargo {
				t.Errorf("ParseReq(%q).Match(%q) = %s, want %s", tt.req, tt.version, got, tt.cargo)
			}
		})
	}
}

// TestMastermindsCompareHugePrerelease proves that Masterminds orders a numeric prerelease
// identifier above 2^64-1 as text, and that Compare orders it as Cargo does (numeric identifiers
// before alphanumeric ones).
func TestMastermindsCompareHugePrerelease(t *testing.T) {
	const a, b = "1.0.0-18446744073709551616", "1.0.0--"
	ma, err := semver.StrictNewVersion(a)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := semver.StrictNewVersion(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := ma.Compare(mb); got != 1 {
		t.Errorf("Masterminds Compare(%s, %s) = %d, want 1 (its text ordering)", a, b, got)
	}
	if got := mustVersion(t, a).Compare(mustVersion(t, b)); got != -1 {
		t.Errorf("Compare(%s, %s) = %d, want -1", a, b, got)
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
