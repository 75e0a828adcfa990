package policies

import (
	"strings"
	"testing"
)

func TestParsePackageRef(t *testing.T) {
	tests := []struct {
		name, in, eco, pkg, spec, err string
	}{
		{name: "exact", in: "npm:lodash@4.17.21", eco: "npm", pkg: "lodash", spec: "4.17.21"},
		{name: "scoped range", in: "npm:@babel/core@^7", eco: "npm", pkg: "@babel/core", spec: "^7"},
		{name: "scoped, no spec", in: "npm:@babel/core", eco: "npm", pkg: "@babel/core"},
		{name: "no spec", in: "PyPI:Requests", eco: "pypi", pkg: "Requests"},
		{name: "purl", in: "pkg:npm/%40babel/core@^7", eco: "npm", pkg: "@babel/core", spec: "^7"},
		{name: "empty spec", in: "npm:lodash@", err: "empty version after @"},
		{name: "no colon", in: "lodash", err: "want ECOSYSTEM:NAME@SPEC"},
		{name: "bad ecosystem", in: "gem:rails@7", err: `unknown ecosystem "gem"`},
		{name: "bad name", in: "npm:a b@1", err: "character names cannot have"},
		{name: "glob purl", in: "pkg:npm/demo*@1", err: "not a pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eco, pkg, spec, err := ParsePackageRef(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("ParsePackageRef(%q) = %v, want an error containing %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || eco != tt.eco || pkg != tt.pkg || spec != tt.spec {
				t.Errorf("ParsePackageRef(%q) = %q, %q, %q, %v, want %q, %q, %q", tt.in, eco, pkg, spec, err, tt.eco, tt.pkg, tt.spec)
			}
		})
	}
}
