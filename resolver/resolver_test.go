package resolver

import (
	"errors"
	"testing"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		name, eco, spec, version string
		want                     bool
	}{
		{"npm caret", "npm", "^1.2.3", "1.9.0", true},
		{"npm caret upper", "npm", "^1.2.3", "2.0.0", false},
		{"npm caret 0.0.x", "npm", "^0.0.3", "0.0.4", false},
		{"npm prerelease same tuple", "npm", ">=1.2.3-beta.1", "1.2.3-beta.2", true},
		{"npm prerelease other tuple", "npm", ">=1.2.3-beta.1", "1.2.4-beta.1", false},
		{"npm hyphen partial", "npm", "1.2 - 2.3", "2.3.9", true},
		{"npm or", "npm", "<1.0.0 || >=3.0.0", "3.1.0", true},
		{"npm loose version", "npm", "1.x", "v1.4.0", true},
		{"cargo bare is caret", "cargo", "1.2.3", "1.9.0", true},
		{"cargo caret 0.0.x", "cargo", "0.0.3", "0.0.4", false},
		{"cargo list", "cargo", ">= 1.2, < 1.5", "1.5.0", false},
		{"pypi compatible", "pypi", "~=1.4.2", "1.4.9", true},
		{"pypi compatible upper", "pypi", "~=1.4.2", "1.5.0", false},
		{"pypi wildcard", "pypi", "==1.*", "1.9.post1", true},
		{"pypi prerelease excluded", "pypi", ">=1.0", "2.0b1", false},
		{"pypi prerelease named", "pypi", ">=1.0b1", "2.0b1", true},
		{"pypi epoch", "pypi", "<2!0", "1!5.0", true},
		{"pypi local", "pypi", "==1.0", "1.0+ubuntu1", true},
		{"deb greater", "deb", ">= 1.2-1", "1.2-1ubuntu1", true},
		{"deb tilde", "deb", "<< 1.0", "1.0~rc1", true},
		{"deb epoch", "deb", "<< 2:1.0", "1:9.9", true},
		{"deb any", "deb", "", "0.1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Match(tt.eco, tt.spec, tt.version)
			if err != nil {
				t.Fatalf("Match(%q, %q, %q) = %v", tt.eco, tt.spec, tt.version, err)
			}
			if got != tt.want {
				t.Errorf("Match(%q, %q, %q) = %v, want %v", tt.eco, tt.spec, tt.version, got, tt.want)
			}
		})
	}
}

func TestMatchErrors(t *testing.T) {
	tests := []struct{ name, eco, spec, version string }{
		{"unknown ecosystem", "maven", "1.0", "1.0"},
		{"npm bad range", "npm", "not a range", "1.0.0"},
		{"npm bad version", "npm", "*", "1.0"},
		{"cargo bad req", "cargo", "1.0 || 2.0", "1.0.0"},
		{"pypi compatible one component", "pypi", "~=1", "1.0"},
		{"pypi legacy version", "pypi", ">=1.0", "1.0-foo"},
		{"deb bad version", "deb", ">= 1.0", "a1.0"},
		{"deb empty revision", "deb", ">= 1.0-", "1.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := Match(tt.eco, tt.spec, tt.version); err == nil {
				t.Errorf("Match(%q, %q, %q) = %v, nil, want an error", tt.eco, tt.spec, tt.version, got)
			}
		})
	}
	if _, err := Match("maven", "", ""); !errors.Is(err, ErrUnknownEcosystem) {
		t.Errorf("Match(maven) = %v, want ErrUnknownEcosystem", err)
	}
}

func TestBest(t *testing.T) {
	tests := []struct {
		name, eco, spec string
		candidates      []string
		want            string
	}{
		{"npm highest", "npm", "^1.0.0", []string{"1.0.0", "1.4.0", "2.0.0", "1.3.9"}, "1.4.0"},
		{"npm skips prerelease", "npm", "^1.0.0", []string{"1.0.0", "1.5.0-rc.1"}, "1.0.0"},
		{"npm skips invalid", "npm", "*", []string{"1.0.0", "garbage"}, "1.0.0"},
		{"cargo 0.x caret", "cargo", "0.2", []string{"0.2.1", "0.3.0", "0.2.9"}, "0.2.9"},
		{"pypi excludes prerelease", "pypi", ">=1.0", []string{"1.0", "2.0b1", "1.5"}, "1.5"},
		{"pypi named prerelease", "pypi", ">=2.0b1", []string{"1.0", "2.0b1", "1.5"}, "2.0b1"},
		{"pypi empty spec falls back to prereleases", "pypi", "", []string{"2.0b1", "2.0a1"}, "2.0b1"},
		{"pypi equal versions keep the first", "pypi", "", []string{"1.0", "1.0.0"}, "1.0"},
		{"pypi candidate as given", "pypi", "", []string{"V1.0-1"}, "V1.0-1"},
		{"deb", "deb", "<< 2.0", []string{"1.0", "2.0~rc1", "2.0", "1:0.1"}, "2.0~rc1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Best(tt.eco, tt.spec, tt.candidates)
			if err != nil {
				t.Fatalf("Best(%q, %q, %q) = %v", tt.eco, tt.spec, tt.candidates, err)
			}
			if got != tt.want {
				t.Errorf("Best(%q, %q, %q) = %q, want %q", tt.eco, tt.spec, tt.candidates, got, tt.want)
			}
		})
	}
}

func TestBestNoMatch(t *testing.T) {
	tests := []struct {
		name, eco, spec string
		candidates      []string
	}{
		{"npm", "npm", ">=3", []string{"1.0.0", "2.0.0"}},
		{"npm only prereleases", "npm", "^1.0.0", []string{"1.1.0-rc.1"}},
		{"cargo none", "cargo", "^2", nil},
		{"pypi only prereleases with a spec", "pypi", ">=1.0", []string{"2.0b1"}},
		{"deb", "deb", ">> 5", []string{"1", "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := Best(tt.eco, tt.spec, tt.candidates); !errors.Is(err, ErrNoMatch) {
				t.Errorf("Best(%q, %q, %q) = %q, %v, want ErrNoMatch", tt.eco, tt.spec, tt.candidates, got, err)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name, eco, a, b string
		want            int
	}{
		{"npm prerelease", "npm", "1.0.0-alpha", "1.0.0", -1},
		{"npm numeric prerelease", "npm", "1.0.0-beta.11", "1.0.0-beta.2", 1},
		{"npm build ignored", "npm", "1.0.0+a", "1.0.0+b", 0},
		{"cargo", "cargo", "1.0.0-rc.1", "1.0.0-beta.2", 1},
		{"pypi trailing zeros", "pypi", "1.0", "1.0.0", 0},
		{"pypi dev before pre", "pypi", "1.0.dev0", "1.0a1", -1},
		{"pypi post after final", "pypi", "1.0.post1", "1.0", 1},
		{"pypi epoch", "pypi", "1!0.1", "2.0", 1},
		{"deb tilde", "deb", "1.0~rc1", "1.0", -1},
		{"deb letters before non-letters", "deb", "1.0a", "1.0+", -1},
		{"deb epoch", "deb", "1:0.1", "2.0", 1},
		{"deb leading zeros", "deb", "1.01", "1.1", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Compare(tt.eco, tt.a, tt.b)
			if err != nil {
				t.Fatalf("Compare(%q, %q, %q) = %v", tt.eco, tt.a, tt.b, err)
			}
			if got != tt.want {
				t.Errorf("Compare(%q, %q, %q) = %d, want %d", tt.eco, tt.a, tt.b, got, tt.want)
			}
		})
	}
	if _, err := Compare("pypi", "1.0", "not a version"); err == nil {
		t.Error("Compare(pypi, 1.0, not a version) = nil error, want an error")
	}
}
