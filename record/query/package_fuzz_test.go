package query

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParsePackage: a --package value that parses is written back by
// String as a value that parses to the same match (a purl's version is
// opaque, and only matches itself), its name holds no
// version operator, a PyPI requirement written as pip takes it
// (pypi:NAME==V) means what pypi:NAME@==V means, and an error wraps
// ErrBadFilter.
func FuzzParsePackage(f *testing.F) {
	for _, s := range []string{
		"npm:lodash", "npm:lodash@4.17.20", "npm:@babel/core@7.24.0", "npm:lodash@^4.17.0",
		"pkg:npm/lodash@4.17.20", "pkg:npm/%40babel/core@7.24.0", "pkg:oci/library/alpine@sha256%3Aabc",
		"pkg:deb/debian/curl@7.88.1-10?arch=amd64", "pkg:pypi/Requests_OAuthlib@1.3.1", "pkg:cargo/serde@1.0.0",
		"pypi:requests@>=2,<3", "pypi:requests==2.31.0", "pypi:requests>=2,<3", "pypi:requests[socks]",
		"pypi:requests[socks]>=2,!=2.31.0,<3", "pypi:Foo.Bar_baz ~= 1.4", "pypi:x===1.0", "pypi:requests@2.31",
		"deb:curl@>= 7.88", "deb:libc6@<< 2.37", "cargo:serde@1", "cargo:serde_json@=1.0.100", "cargo:a-b@>=1, <2",
		"oci:library/alpine@sha256:abc", "npm:a@*", "npm:x@1 || 2", "npm:", ":x", "pkg:", "pypi:==1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePackage(s)
		if err != nil {
			if !errors.Is(err, ErrBadFilter) {
				t.Fatalf("ParsePackage(%q) error = %v, want it to wrap ErrBadFilter", s, err)
			}
			return
		}
		if p.Ecosystem == "" || p.Name == "" {
			t.Fatalf("ParsePackage(%q) = %+v, want an ecosystem and a name", s, p)
		}
		if strings.ContainsAny(p.Name, nameOperators) {
			t.Fatalf("ParsePackage(%q) = %+v, whose name holds a version operator", s, p)
		}
		if p.Version != "" && p.Range != "" {
			t.Fatalf("ParsePackage(%q) = %+v, both a version and a range", s, p)
		}
		if p.Version != "" && !p.MatchVersion(p.Version) {
			t.Fatalf("ParsePackage(%q) = %+v, which does not match its own version", s, p)
		}
		if strings.HasPrefix(s, "pkg:") || !utf8.ValidString(s) {
			// (resolver.CheckName takes a name of invalid UTF-8, which
			// lower-casing, for cargo, pypi, deb and oci, turns into longer
			// U+FFFD runes: such a name matches no recorded one and may not
			// parse again once normalised.)
			// A purl's version is opaque and exact, whatever it looks
			// like: eco:name@version may read it as a range, or not at all.
			return
		}
		again, err := ParsePackage(p.String())
		if err != nil {
			t.Fatalf("ParsePackage(%q) = %q, which does not parse again: %v", s, p.String(), err)
		}
		if again.Ecosystem != p.Ecosystem || again.Name != p.Name || again.Version != p.Version || again.Range != p.Range {
			t.Fatalf("ParsePackage(%q) = %+v, read back from %q as %+v", s, *p, p.String(), *again)
		}
		if p.Range != "" && !strings.HasPrefix(s, "pkg:") && p.Ecosystem == "pypi" && !strings.Contains(s, "@") {
			eco, rest, _ := strings.Cut(s, ":")
			i := strings.IndexAny(rest, pep440Operators)
			at, err := ParsePackage(eco + ":" + strings.TrimSpace(rest[:i]) + "@" + rest[i:])
			if err != nil || at.String() != p.String() {
				t.Fatalf("ParsePackage(%q) = %q, but its @ form gives %v, %v", s, p.String(), at, err)
			}
		}
	})
}
