package cargo

import (
	"errors"
	"testing"
)

// bounds states a requirement's meaning as the Cargo book writes it ("^1.2.3 := >=1.2.3,
// <2.0.0"), with versions that must and must not match.
type bounds struct {
	name  string
	req   string
	match []string
	miss  []string
}

// TestCargoBookExamples checks every example of the Cargo book's "Specifying Dependencies"
// chapter (caret, tilde, wildcard, comparison and multiple requirements) at and around each
// bound.
func TestCargoBookExamples(t *testing.T) {
	tests := []bounds{
		// Caret requirements.
		{"caret 1.2.3", "^1.2.3", []string{"1.2.3", "1.2.4", "1.9.0", "1.99.99"}, []string{"1.2.2", "2.0.0", "0.9.9", "2.0.0-alpha"}},
		{"caret 1.2", "^1.2", []string{"1.2.0", "1.3.7"}, []string{"1.1.9", "2.0.0"}},
		{"caret 1", "^1", []string{"1.0.0", "1.9.9"}, []string{"0.9.9", "2.0.0"}},
		{"caret 0.2.3", "^0.2.3", []string{"0.2.3", "0.2.9"}, []string{"0.2.2", "0.3.0", "1.0.0"}},
		{"caret 0.2", "^0.2", []string{"0.2.0", "0.2.99"}, []string{"0.1.9", "0.3.0"}},
		{"caret 0.0.3", "^0.0.3", []string{"0.0.3"}, []string{"0.0.2", "0.0.4", "0.1.0"}},
		{"caret 0.0", "^0.0", []string{"0.0.0", "0.0.9"}, []string{"0.1.0", "1.0.0"}},
		{"caret 0", "^0", []string{"0.0.0", "0.9.9"}, []string{"1.0.0"}},
		{"bare is caret", "1.2.3", []string{"1.2.3", "1.5.0"}, []string{"1.2.2", "2.0.0"}},
		{"bare 0.0.3 is caret", "0.0.3", []string{"0.0.3"}, []string{"0.0.4"}},
		// Tilde requirements.
		{"tilde 1.2.3", "~1.2.3", []string{"1.2.3", "1.2.9"}, []string{"1.2.2", "1.3.0"}},
		{"tilde 1.2", "~1.2", []string{"1.2.0", "1.2.9"}, []string{"1.1.9", "1.3.0"}},
		{"tilde 1", "~1", []string{"1.0.0", "1.9.9"}, []string{"0.9.9", "2.0.0"}},
		// Wildcard requirements.
		{"wildcard *", "*", []string{"0.0.0", "1.2.3", "99.0.0"}, []string{"1.0.0-alpha"}},
		{"wildcard 1.*", "1.*", []string{"1.0.0", "1.9.9"}, []string{"0.9.9", "2.0.0"}},
		{"wildcard 1.2.*", "1.2.*", []string{"1.2.0", "1.2.9"}, []string{"1.1.9", "1.3.0"}},
		{"wildcard x", "1.2.x", []string{"1.2.7"}, []string{"1.3.0"}},
		// Comparison requirements.
		{"comparison >= 1.2.0", ">= 1.2.0", []string{"1.2.0", "5.0.0"}, []string{"1.1.9"}},
		{"comparison > 1", "> 1", []string{"2.0.0"}, []string{"1.0.0", "1.9.9"}},
		{"comparison < 2", "< 2", []string{"1.9.9", "0.0.1"}, []string{"2.0.0", "2.0.1"}},
		{"comparison = 1.2.3", "= 1.2.3", []string{"1.2.3", "1.2.3+build"}, []string{"1.2.4", "1.2.2"}},
		{"comparison <= 1.2", "<=1.2", []string{"1.2.9", "1.1.0"}, []string{"1.3.0"}},
		// Multiple requirements.
		{"multiple", ">= 1.2, < 1.5", []string{"1.2.0", "1.4.9"}, []string{"1.1.9", "1.5.0"}},
		// Pre-releases: excluded unless the requirement names one on the same major.minor.patch.
		{"pre excluded by plain caret", "1.0", []string{"1.0.0"}, []string{"1.0.0-alpha", "1.1.0-beta"}},
		{"pre named", "1.0.0-alpha", []string{"1.0.0-alpha", "1.0.0-beta", "1.0.0", "1.1.0"}, []string{"1.0.1-alpha", "0.9.0"}},
		{"pre named ordering", ">=1.0.0-beta.2", []string{"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "2.0.0"}, []string{"1.0.0-beta.1", "1.0.0-alpha", "1.0.1-alpha"}},
		{"pre exact", "=1.0.0-alpha.1", []string{"1.0.0-alpha.1"}, []string{"1.0.0-alpha.2", "1.0.0"}},
		{"pre tilde", "~1.2.3-beta", []string{"1.2.3-beta", "1.2.3-rc", "1.2.3", "1.2.4"}, []string{"1.2.3-alpha", "1.2.4-beta", "1.3.0"}},
		{"pre less excludes others", "<1.0.0", []string{"0.9.9"}, []string{"1.0.0-alpha", "0.9.9-rc.1"}},
		{"pre in range", ">=1.0.0-alpha, <1.0.0", []string{"1.0.0-alpha", "1.0.0-rc.1"}, []string{"1.0.0", "0.9.0-alpha"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseReq(tt.req)
			if err != nil {
				t.Fatalf("ParseReq(%q) = %v, want success", tt.req, err)
			}
			for _, s := range tt.match {
				if got := r.Match(mustVersion(t, s)); !got {
					t.Errorf("ParseReq(%q).Match(%s) = false, want true", tt.req, s)
				}
			}
			for _, s := range tt.miss {
				if got := r.Match(mustVersion(t, s)); got {
					t.Errorf("ParseReq(%q).Match(%s) = true, want false", tt.req, s)
				}
			}
		})
	}
}

func mustVersion(t *testing.T, s string) *Version {
	t.Helper()
	v, err := ParseVersion(s)
	if err != nil {
		t.Fatalf("ParseVersion(%q) = %v", s, err)
	}
	return v
}

func TestParseReqErrors(t *testing.T) {
	tests := []struct {
		name, req string
	}{
		{"empty", ""},
		{"leading zero", "01.2"},
		{"leading zero minor", "1.02"},
		{"leading v", "v1.2.3"},
		{"trailing comma", "1.2,"},
		{"no comma", "1.2 1.3"},
		{"wildcard not alone", "*, 1.0"},
		{"wildcard then number", "1.*.3"},
		{"op before star", ">=*"},
		{"npm style or", "1.0 || 2.0"},
		{"npm hyphen", "1.0 - 2.0"},
		{"empty prerelease", "1.2.3-"},
		{"prerelease leading zero", "1.2.3-01"},
		{"tab", "\t1.2.3"},
		{"overflow", "18446744073709551616"},
		{"33 comparators", ">=1" + repeat(", >=1", 32)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r, err := ParseReq(tt.req); !errors.Is(err, ErrInvalidReq) {
				t.Errorf("ParseReq(%q) = %v, %v, want ErrInvalidReq", tt.req, r, err)
			}
		})
	}
	if _, err := ParseReq(">=1" + repeat(", >=1", 31)); err != nil {
		t.Errorf("ParseReq(32 comparators) = %v, want success", err)
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

func TestParseVersion(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{"plain", "1.2.3", "1.2.3", true},
		{"pre and build", "1.0.0-alpha.1+build.5", "1.0.0-alpha.1+build.5", true},
		{"partial", "1.2", "", false},
		{"v prefix", "v1.2.3", "", false},
		{"leading zero", "1.02.3", "", false},
		{"pre leading zero", "1.2.3-01", "", false},
		{"pre alnum leading zero ok", "1.2.3-0a", "1.2.3-0a", true},
		{"empty pre segment", "1.2.3-a..b", "", false},
		{"trailing dot", "1.2.3-a.", "", false},
		{"space", " 1.2.3", "", false},
		{"max", "18446744073709551615.0.0", "18446744073709551615.0.0", true},
		{"overflow", "18446744073709551616.0.0", "", false},
		{"long", "1.0.0-" + repeat("a", 300), "1.0.0-" + repeat("a", 300), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := ParseVersion(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ParseVersion(%q) = %v, want ok %v", tt.in, err, tt.ok)
			}
			if err == nil && v.String() != tt.want {
				t.Errorf("ParseVersion(%q) = %s, want %s", tt.in, v, tt.want)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	// The semver 2.0 precedence example, in order, then the identifiers Masterminds cannot
	// parse as numbers.
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "2.0.0", "2.1.0", "2.1.1"}
	huge := []string{"1.0.0-2", "1.0.0-18446744073709551616", "1.0.0-99999999999999999999999", "1.0.0--", "1.0.0-a"}
	for _, list := range [][]string{order, huge} {
		for i := range list {
			for j := range list {
				want := 0
				switch {
				case i < j:
					want = -1
				case i > j:
					want = 1
				}
				if got := mustVersion(t, list[i]).Compare(mustVersion(t, list[j])); got != want {
					t.Errorf("Compare(%s, %s) = %d, want %d", list[i], list[j], got, want)
				}
			}
		}
	}
}

func TestReqString(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"bare", "1.2.3", "^1.2.3"},
		{"list", ">= 1.2, < 1.5", ">=1.2, <1.5"},
		{"wildcard", "1.*", "1.*"},
		{"wildcard patch", "1.2.x", "1.2.*"},
		{"star", " * ", "*"},
		{"pre", "=1.0.0-rc.1", "=1.0.0-rc.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseReq(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.String(); got != tt.want {
				t.Errorf("ParseReq(%q).String() = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
