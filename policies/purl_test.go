package policies

import (
	"strings"
	"testing"
)

func TestParsePurl(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Purl
		err  string
	}{
		{name: "npm with range", in: "pkg:npm/lodash@<4.17.21", want: Purl{Type: "npm", Name: "lodash", Version: "<4.17.21"}},
		{name: "npm encoded scope", in: "pkg:npm/%40scope/name@^1", want: Purl{Type: "npm", Name: "@scope/name", Version: "^1"}},
		{name: "npm bare scope", in: "pkg:npm/@scope/name", want: Purl{Type: "npm", Name: "@scope/name"}},
		{name: "npm or range", in: "pkg:npm/rc@1.2.9 || 1.3.9", want: Purl{Type: "npm", Name: "rc", Version: "1.2.9 || 1.3.9"}},
		{name: "npm scope glob", in: "pkg:npm/%40myorg/*", want: Purl{Type: "npm", Name: "@myorg/*"}},
		{name: "pypi normalized", in: "pkg:pypi/Django_Rest.Framework@>=3,<4", want: Purl{Type: "pypi", Name: "django-rest-framework", Version: ">=3,<4"}},
		{name: "cargo underscore", in: "pkg:cargo/serde_json", want: Purl{Type: "cargo", Name: "serde-json"}},
		{name: "deb", in: "pkg:deb/openssl@<< 3.0.11-1", want: Purl{Type: "deb", Name: "openssl", Version: "<< 3.0.11-1"}},
		{name: "oci namespace", in: "pkg:oci/library/alpine@3.19", want: Purl{Type: "oci", Name: "library/alpine", Version: "3.19"}},
		{name: "upper-case type", in: "pkg:NPM/left-pad", want: Purl{Type: "npm", Name: "left-pad"}},
		{name: "no scheme", in: "npm/lodash", err: "must start with pkg:"},
		{name: "no name", in: "pkg:npm/", err: "empty name"},
		{name: "no type", in: "pkg:lodash", err: "want pkg:TYPE/NAME"},
		{name: "unknown type", in: "pkg:nosuch/rails", err: `unknown type "nosuch"`},
		{name: "qualifiers", in: "pkg:npm/lodash?arch=x86", err: "qualifiers"},
		{name: "subpath", in: "pkg:npm/lodash#lib", err: "subpaths"},
		{name: "empty version", in: "pkg:npm/lodash@", err: "empty version"},
		{name: "npm namespace without @", in: "pkg:npm/scope/name", err: "npm namespace is a scope"},
		{name: "pypi namespace", in: "pkg:pypi/org/requests", err: "have no namespace"},
		{name: "bad escape", in: "pkg:npm/%zz", err: "name"},
		{name: "bad glob", in: "pkg:npm/[abc", err: "bad name pattern"},
		{name: "space in name", in: "pkg:npm/a%20b", err: "slash or space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePurl(tt.in)
			checkErr(t, "ParsePurl", tt.in, err, tt.err)
			if tt.err == "" && got != tt.want {
				t.Errorf("ParsePurl(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestPurlMatchName(t *testing.T) {
	tests := []struct {
		name     string
		purl     string
		eco, pkg string
		want     bool
	}{
		{name: "exact", purl: "pkg:npm/lodash", eco: "npm", pkg: "lodash", want: true},
		{name: "npm is case-sensitive", purl: "pkg:npm/lodash", eco: "npm", pkg: "Lodash", want: false},
		{name: "other ecosystem", purl: "pkg:npm/requests", eco: "pypi", pkg: "requests", want: false},
		{name: "pypi spellings", purl: "pkg:pypi/python-dateutil", eco: "pypi", pkg: "Python_DateUtil", want: true},
		{name: "scope glob", purl: "pkg:npm/%40myorg/*", eco: "npm", pkg: "@myorg/tool", want: true},
		{name: "scope glob other scope", purl: "pkg:npm/%40myorg/*", eco: "npm", pkg: "@other/tool", want: false},
		{name: "glob does not cross slash", purl: "pkg:npm/*", eco: "npm", pkg: "@myorg/tool", want: false},
		{name: "deb any", purl: "pkg:deb/*", eco: "deb", pkg: "libc6", want: true},
		{name: "prefix is not a match", purl: "pkg:npm/lodash", eco: "npm", pkg: "lodash-es", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePurl(tt.purl)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.MatchName(tt.eco, tt.pkg); got != tt.want {
				t.Errorf("ParsePurl(%q).MatchName(%q, %q) = %v, want %v", tt.purl, tt.eco, tt.pkg, got, tt.want)
			}
		})
	}
}

func TestPurlStringRoundTrip(t *testing.T) {
	for _, s := range []string{"pkg:npm/%40scope/name@^1", "pkg:pypi/requests", "pkg:npm/lodash@<4.17.21"} {
		p, err := ParsePurl(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.String(); got != s {
			t.Errorf("ParsePurl(%q).String() = %q, want %q", s, got, s)
		}
	}
}

func FuzzParsePurl(f *testing.F) {
	for _, s := range []string{"pkg:npm/lodash@<4.17.21", "pkg:npm/%40scope/name@^1", "pkg:pypi/requests", "pkg:npm/@a/*", "pkg:oci/library/alpine@3", "pkg://deb/x@1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePurl(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "purl ") {
				t.Fatalf("ParsePurl(%q) = error %q, want it to start with purl", s, err)
			}
			return
		}
		if p.Name == "" || !knownEcosystem(p.Type) {
			t.Fatalf("ParsePurl(%q) = %+v, want a type and a name", s, p)
		}
		// What String prints must parse back to the same pattern.
		q, err := ParsePurl(p.String())
		if err != nil {
			t.Fatalf("ParsePurl(%q) = error %v for String() of %+v", p.String(), err, p)
		}
		if q != p {
			t.Fatalf("ParsePurl(%q) = %+v, want %+v", p.String(), q, p)
		}
	})
}
