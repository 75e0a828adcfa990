package purl

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/resolver/ecosystem"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Purl
		err  string
	}{
		{name: "plain", in: "pkg:npm/lodash@4.17.21", want: Purl{Type: "npm", Name: "lodash", Version: "4.17.21"}},
		{name: "no version", in: "pkg:pypi/requests", want: Purl{Type: "pypi", Name: "requests"}},
		{name: "npm encoded scope", in: "pkg:npm/%40babel/core@7.24.0", want: Purl{Type: "npm", Namespace: "@babel", Name: "core", Version: "7.24.0"}},
		{name: "npm bare scope", in: "pkg:npm/@babel/core", want: Purl{Type: "npm", Namespace: "@babel", Name: "core"}},
		{name: "npm bare scope with version", in: "pkg:npm/@babel/core@7", want: Purl{Type: "npm", Namespace: "@babel", Name: "core", Version: "7"}},
		{name: "upper-case type", in: "pkg:NPM/left-pad", want: Purl{Type: "npm", Name: "left-pad"}},
		{name: "slashes after scheme", in: "pkg://deb/curl", want: Purl{Type: "deb", Name: "curl"}},
		{name: "deb vendor and encoded version", in: "pkg:deb/debian/curl@7.88.1-10%2Bdeb12u5?arch=amd64&distro=bookworm",
			want: Purl{Type: "deb", Namespace: "debian", Name: "curl", Version: "7.88.1-10+deb12u5", Qualifiers: map[string]string{"arch": "amd64", "distro": "bookworm"}}},
		{name: "oci path", in: "pkg:oci/library/alpine@3.19", want: Purl{Type: "oci", Namespace: "library", Name: "alpine", Version: "3.19"}},
		{name: "empty namespace segments", in: "pkg:generic//a///b/", want: Purl{Type: "generic", Namespace: "a", Name: "b"}},
		{name: "range kept", in: "pkg:npm/rc@1.2.9 || 1.3.9", want: Purl{Type: "npm", Name: "rc", Version: "1.2.9 || 1.3.9"}},
		{name: "last @ starts the version", in: "pkg:npm/a%40b@1@2", want: Purl{Type: "npm", Name: "a@b@1", Version: "2"}},
		{name: "qualifier keys lower, empty values dropped", in: "pkg:npm/x?Arch=x86&os=&", want: Purl{Type: "npm", Name: "x", Qualifiers: map[string]string{"arch": "x86"}}},
		{name: "subpath cleaned", in: "pkg:golang/x@1#./a//b/../c", want: Purl{Type: "golang", Name: "x", Version: "1", Subpath: "a/b/c"}},
		{name: "no scheme", in: "npm/lodash", err: "must start with pkg:"},
		{name: "no type", in: "pkg:lodash", err: "want pkg:TYPE/NAME"},
		{name: "bad type", in: "pkg:9np/x", err: "bad type"},
		{name: "type with space", in: "pkg:n m/x", err: "bad type"},
		{name: "no name", in: "pkg:npm/", err: "empty name"},
		{name: "bare scope, no name", in: "pkg:npm/@scope", err: "empty name"},
		{name: "empty version", in: "pkg:npm/lodash@", err: "empty version after @"},
		{name: "bad name escape", in: "pkg:npm/%zz", err: "name: invalid URL escape"},
		{name: "bad version escape", in: "pkg:npm/x@%g1", err: "version: invalid URL escape"},
		{name: "encoded slash in name", in: "pkg:npm/a%2Fb", err: "contains a slash"},
		{name: "encoded slash in namespace", in: "pkg:oci/a%2Fb/c", err: "bad namespace segment"},
		{name: "npm deep namespace", in: "pkg:npm/a/b/c", err: "npm namespace is a scope"},
		{name: "qualifier without =", in: "pkg:npm/x?arch", err: "has no ="},
		{name: "qualifier repeated", in: "pkg:npm/x?a=1&A=2", err: "repeated"},
		{name: "bad qualifier key", in: "pkg:npm/x?a b=1", err: "bad key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.err != "" {
				var se *SyntaxError
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrSyntax) || !errors.As(err, &se) {
					t.Fatalf("Parse(%q) = %+v, %v, want a *SyntaxError containing %q", tt.in, got, err, tt.err)
				}
				if want := fmt.Sprintf("purl %q: ", tt.in); !strings.HasPrefix(err.Error(), want) {
					t.Errorf("Parse(%q) error = %q, want it to start with %q", tt.in, err, want)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse(%q) = %+v, %v, want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "plain", in: "pkg:npm/lodash@4.17.21", want: "pkg:npm/lodash@4.17.21"},
		{name: "scope encoded", in: "pkg:npm/@babel/core", want: "pkg:npm/%40babel/core"},
		{name: "plus encoded, qualifiers sorted", in: "pkg:deb/debian/curl@1+b?z=1&a=2", want: "pkg:deb/debian/curl@1%2Bb?a=2&z=1"},
		{name: "subpath", in: "pkg:golang/x#a/./b", want: "pkg:golang/x#a/b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.String(); got != tt.want {
				t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestDeb(t *testing.T) {
	tests := []struct {
		name, pkg, version, arch, want string
	}{
		{name: "arch all", pkg: "cowsay", version: "3.03+dfsg2-8", arch: "all", want: "pkg:deb/debian/cowsay@3.03%2Bdfsg2-8?arch=all"},
		{name: "epoch", pkg: "libc6", version: "1:2.36-9", arch: "amd64", want: "pkg:deb/debian/libc6@1%3A2.36-9?arch=amd64"},
		{name: "no arch", pkg: "sl", version: "5.02-1", want: "pkg:deb/debian/sl@5.02-1"},
		{name: "no version", pkg: "sl", want: "pkg:deb/debian/sl"},
		{name: "no name", version: "1", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Deb(tt.pkg, tt.version, tt.arch); got != tt.want {
				t.Errorf("Deb(%q, %q, %q) = %q, want %q", tt.pkg, tt.version, tt.arch, got, tt.want)
			}
		})
	}
	// Of spells a deb as Deb does, so that the records that know no
	// architecture (a pkg.filter) still name the same package.
	if got, want := Of(ecosystem.Deb, "sl", "5.02-1"), Deb("sl", "5.02-1", ""); got != want {
		t.Errorf("Of(deb, sl, 5.02-1) = %q, want %q", got, want)
	}
	if p, err := Parse(Deb("libc6", "1:2.36-9", "amd64")); err != nil || p.Version != "1:2.36-9" || p.Qualifiers["arch"] != "amd64" {
		t.Errorf("Parse(Deb(libc6, 1:2.36-9, amd64)) = %+v, %v", p, err)
	}
}

// FuzzParse checks that Parse never panics, that its errors are
// *SyntaxError, and that String of what it returns parses back to the same.
// Seeds are in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add("pkg:npm/%40babel/core@7.24.0")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q) error = %v (%T), want a *SyntaxError", s, err, err)
			}
			return
		}
		if p.Type == "" || p.Name == "" {
			t.Fatalf("Parse(%q) = %+v, want a type and a name", s, p)
		}
		q, err := Parse(p.String())
		if err != nil {
			t.Fatalf("Parse(%q) = error %v for String() of %+v", p.String(), err, p)
		}
		if !reflect.DeepEqual(q, p) {
			t.Fatalf("Parse(%q) = %+v, want %+v", p.String(), q, p)
		}
	})
}
