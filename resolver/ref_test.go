package resolver

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	tests := []struct {
		name, in        string
		eco, pkg, spec  string
		err             string
		notRef, unknown bool
	}{
		{name: "name only", in: "npm:lodash", eco: NPM, pkg: "lodash"},
		{name: "exact", in: "npm:lodash@4.17.20", eco: NPM, pkg: "lodash", spec: "4.17.20"},
		{name: "range", in: "npm:lodash@^4.17.0", eco: NPM, pkg: "lodash", spec: "^4.17.0"},
		{name: "scoped", in: "npm:@babel/core@^7", eco: NPM, pkg: "@babel/core", spec: "^7"},
		{name: "scoped without spec", in: "npm:@babel/core", eco: NPM, pkg: "@babel/core"},
		{name: "spec holds an @", in: "npm:x@npm:y@1", eco: NPM, pkg: "x", spec: "npm:y@1"},
		{name: "spec trimmed", in: "deb:curl@ >= 7.88 ", eco: Deb, pkg: "curl", spec: ">= 7.88"},
		{name: "pypi set", in: "pypi:requests@>=2,<3", eco: PyPI, pkg: "requests", spec: ">=2,<3"},
		{name: "ecosystem case-folded", in: "PyPI:Typing_Extensions@==4.12.2", eco: PyPI, pkg: "Typing_Extensions", spec: "==4.12.2"},
		{name: "oci path", in: "oci:library/alpine@3.19", eco: OCI, pkg: "library/alpine", spec: "3.19"},
		{name: "empty spec", in: "npm:lodash@", err: "empty version after @"},
		{name: "blank spec", in: "npm:lodash@  ", err: "empty version after @"},
		{name: "no colon", in: "lodash", err: "want ECOSYSTEM:NAME[@SPEC]", notRef: true},
		{name: "no ecosystem", in: ":lodash", err: "want ECOSYSTEM:NAME[@SPEC]", notRef: true},
		{name: "empty", in: "", notRef: true, err: "want"},
		{name: "bad ecosystem", in: "nosuch:rails@7", err: `unknown ecosystem "nosuch" (want one of npm, pypi, cargo, deb, oci`, unknown: true},
		{name: "empty name", in: "npm:", err: "empty package name"},
		{name: "only a spec", in: "npm:@1.0.0", err: "@scope/name"},
		{name: "scope outside npm", in: "pypi:@x/y", err: "only npm names have an @scope"},
		{name: "space in name", in: "npm:a b@1", err: "character names cannot have"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRef(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseRef(%q) = %+v, %v, want an error containing %q", tt.in, r, err, tt.err)
				}
				if !errors.Is(err, ErrBadRef) || errors.Is(err, ErrNotRef) != tt.notRef || errors.Is(err, ErrUnknownEcosystem) != tt.unknown {
					t.Errorf("ParseRef(%q) = %v, want ErrBadRef, ErrNotRef %v, ErrUnknownEcosystem %v", tt.in, err, tt.notRef, tt.unknown)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRef(%q) = %v", tt.in, err)
			}
			if r.Ecosystem.Name() != tt.eco || r.Name != tt.pkg || r.Spec != tt.spec {
				t.Errorf("ParseRef(%q) = %s %q %q, want %s %q %q", tt.in, r.Ecosystem.Name(), r.Name, r.Spec, tt.eco, tt.pkg, tt.spec)
			}
		})
	}
}

func TestRefString(t *testing.T) {
	for _, s := range []string{"npm:lodash", "npm:@babel/core@^7", "pypi:requests@>=2,<3"} {
		r, err := ParseRef(s)
		if err != nil {
			t.Fatalf("ParseRef(%q) = %v", s, err)
		}
		if got := r.String(); got != s {
			t.Errorf("ParseRef(%q).String() = %q, want %q", s, got, s)
		}
	}
}

// FuzzParseRef checks that ParseRef never panics, that every error wraps ErrBadRef, and that a
// parsed ref prints as a string that parses back to the same ref.
func FuzzParseRef(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err != nil {
			if !errors.Is(err, ErrBadRef) {
				t.Fatalf("ParseRef(%q) = %v, want it to wrap ErrBadRef", s, err)
			}
			return
		}
		if r.Ecosystem == nil || r.Name == "" || strings.TrimSpace(r.Spec) != r.Spec {
			t.Fatalf("ParseRef(%q) = %+v: no ecosystem, an empty name or an untrimmed spec", s, r)
		}
		back, err := ParseRef(r.String())
		if err != nil || back != r {
			t.Fatalf("ParseRef(%q).String() = %q, which parses to %+v, %v", s, r.String(), back, err)
		}
	})
}
