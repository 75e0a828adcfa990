package resolver

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/resolver/ecosystem"
)

func TestLookupFacts(t *testing.T) {
	tests := []struct {
		name      string
		eco       string
		manager   string
		commands  []string
		namespace Namespace
		listing   Listing
		ranges    bool
		prefix    string
		upstream  string
	}{
		{name: "npm", eco: NPM, manager: "npm", commands: []string{"npm", "npx"}, namespace: Scope, listing: Packument, ranges: true,
			prefix: "/npm/", upstream: "https://registry.npmjs.org/"},
		{name: "pypi", eco: PyPI, manager: "pip", commands: []string{"pip", "pip3"}, namespace: NoNamespace, listing: SimpleAPI, ranges: true,
			prefix: "/pypi/", upstream: "https://pypi.org/simple/"},
		{name: "cargo", eco: Cargo, manager: "cargo", commands: []string{"cargo"}, namespace: NoNamespace, listing: SparseIndex, ranges: true,
			prefix: "/crates/", upstream: "https://index.crates.io/"},
		{name: "deb", eco: Deb, manager: "apt", commands: []string{"apt", "apt-get"}, namespace: Vendor, listing: NoListing, ranges: true,
			prefix: "/debian/", upstream: "http://deb.debian.org/debian/"},
		{name: "oci", eco: OCI, manager: "", namespace: Path, listing: NoListing, ranges: false,
			prefix: "/v2/", upstream: "https://registry-1.docker.io"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Lookup(tt.eco)
			if err != nil {
				t.Fatalf("Lookup(%q) = %v", tt.eco, err)
			}
			if e.Name() != tt.eco || e.Manager() != tt.manager || e.Namespace() != tt.namespace ||
				e.Listing() != tt.listing || e.HasRanges() != tt.ranges {
				t.Errorf("Lookup(%q) = {%s %q %d %d %v}, want {%s %q %d %d %v}", tt.eco,
					e.Name(), e.Manager(), e.Namespace(), e.Listing(), e.HasRanges(),
					tt.eco, tt.manager, tt.namespace, tt.listing, tt.ranges)
			}
			if got := e.Commands(); !slices.Equal(got, tt.commands) {
				t.Errorf("Lookup(%q).Commands() = %q, want %q", tt.eco, got, tt.commands)
			}
			if e.MirrorPrefix() != tt.prefix || e.DefaultUpstream() != tt.upstream {
				t.Errorf("Lookup(%q) mirror = %q from %q, want %q from %q", tt.eco, e.MirrorPrefix(), e.DefaultUpstream(), tt.prefix, tt.upstream)
			}
			if !Known(tt.eco) {
				t.Errorf("Known(%q) = false, want true", tt.eco)
			}
		})
	}
}

// TestCommandsAreOwned: no command runs two ecosystems' managers, and changing the slice
// Commands returns changes no other.
func TestCommandsAreOwned(t *testing.T) {
	owner := map[string]string{}
	for _, e := range Ecosystems() {
		for _, c := range e.Commands() {
			if o, dup := owner[c]; dup {
				t.Errorf("command %q runs both %s's and %s's manager", c, o, e.Name())
			}
			owner[c] = e.Name()
		}
	}
	e, _ := Lookup(NPM)
	e.Commands()[1] = "changed"
	if got := e.Commands(); !slices.Equal(got, []string{"npm", "npx"}) {
		t.Errorf("npm Commands() after changing a returned slice = %q", got)
	}
}

// TestMirrorPrefixes: each ecosystem's mirror prefix is a path of its own, /…/, which no
// other's begins with (the mirror routes by the first that matches).
func TestMirrorPrefixes(t *testing.T) {
	es := Ecosystems()
	for _, e := range es {
		p := e.MirrorPrefix()
		if len(p) < 3 || p[0] != '/' || p[len(p)-1] != '/' {
			t.Errorf("%s MirrorPrefix() = %q, want /NAME/", e.Name(), p)
		}
		for _, o := range es {
			if o != e && strings.HasPrefix(o.MirrorPrefix(), p) {
				t.Errorf("%s's mirror prefix %q begins with %s's %q", o.Name(), o.MirrorPrefix(), e.Name(), p)
			}
		}
	}
}

// TestRegisterChecksBothLists: an ecosystem without version facts, or facts without an
// ecosystem, panic when the registry is built, naming what is missing.
func TestRegisterChecksBothLists(t *testing.T) {
	tests := []struct {
		name  string
		infos []ecosystem.Info
		facts map[string]versionFacts
		want  string
	}{
		{name: "no facts", infos: []ecosystem.Info{{Name: "npm"}, {Name: "gem"}}, facts: map[string]versionFacts{"npm": {}},
			want: `ecosystem "gem" (resolver/ecosystem) has no version facts`},
		{name: "no ecosystem", infos: []ecosystem.Info{{Name: "npm"}}, facts: map[string]versionFacts{"npm": {}, "gem": {}},
			want: "version facts for 2 ecosystems, resolver/ecosystem lists 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tt.want) {
					t.Errorf("register panicked with %v, want %q", r, tt.want)
				}
			}()
			register(tt.infos, tt.facts)
		})
	}
	got := register(ecosystem.List(), versionFactsOf)
	if len(got) != len(ecosystems) || got[0].Name() != NPM {
		t.Errorf("register(the registry) = %d ecosystems, want %d", len(got), len(ecosystems))
	}
}

func TestLookupUnknown(t *testing.T) {
	for _, name := range []string{"nosuch", "", "NPM", "maven"} {
		if _, err := Lookup(name); !errors.Is(err, ErrUnknownEcosystem) {
			t.Errorf("Lookup(%q) = %v, want ErrUnknownEcosystem", name, err)
		}
		if Known(name) {
			t.Errorf("Known(%q) = true, want false", name)
		}
	}
}

func TestNames(t *testing.T) {
	want := []string{"npm", "pypi", "cargo", "deb", "oci"}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	Ecosystems()[0] = nil
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() after changing the slice Ecosystems returned = %v, want %v", got, want)
	}
}

func TestOCIHasNoOrder(t *testing.T) {
	e, _ := Lookup(OCI)
	if _, err := e.ParseVersion("3.19"); !errors.Is(err, ErrNoOrder) {
		t.Errorf("oci ParseVersion(3.19) = %v, want ErrNoOrder", err)
	}
	if _, err := e.ParseSpec(">=3"); !errors.Is(err, ErrNoOrder) {
		t.Errorf("oci ParseSpec(>=3) = %v, want ErrNoOrder", err)
	}
	if _, err := Compare(OCI, "3.19", "3.20"); !errors.Is(err, ErrNoOrder) {
		t.Errorf("Compare(oci) = %v, want ErrNoOrder", err)
	}
}

func TestExactVersion(t *testing.T) {
	tests := []struct {
		name, eco, spec, want string
		ok                    bool
	}{
		{name: "npm full", eco: NPM, spec: "4.17.20", want: "4.17.20", ok: true},
		{name: "npm v prefix", eco: NPM, spec: "v1.2.3", want: "1.2.3", ok: true},
		{name: "npm prerelease", eco: NPM, spec: "1.0.0-rc.1+b", want: "1.0.0-rc.1+b", ok: true},
		{name: "npm partial is a range", eco: NPM, spec: "4.17"},
		{name: "npm caret", eco: NPM, spec: "^4.17.0"},
		{name: "cargo full", eco: Cargo, spec: "1.0.200", want: "1.0.200", ok: true},
		{name: "pypi bare", eco: PyPI, spec: "2.31.0", want: "2.31.0", ok: true},
		{name: "pypi ==", eco: PyPI, spec: "==4.12.2", want: "4.12.2", ok: true},
		{name: "pypi ===", eco: PyPI, spec: "===1.0-foo", want: "1.0-foo", ok: true},
		{name: "pypi wildcard", eco: PyPI, spec: "==4.*"},
		{name: "pypi set", eco: PyPI, spec: ">=2,<3"},
		{name: "deb", eco: Deb, spec: "7.88.1-10+deb12u5", want: "7.88.1-10+deb12u5", ok: true},
		{name: "deb relation", eco: Deb, spec: ">= 7.88"},
		{name: "oci tag", eco: OCI, spec: "3.19", want: "3.19", ok: true},
		{name: "oci digest", eco: OCI, spec: "sha256:abc", want: "sha256:abc", ok: true},
		{name: "oci range", eco: OCI, spec: ">=3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := Lookup(tt.eco)
			got, ok := e.ExactVersion(tt.spec)
			if got != tt.want || ok != tt.ok {
				t.Errorf("%s ExactVersion(%q) = %q, %v, want %q, %v", tt.eco, tt.spec, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestMayBeRange(t *testing.T) {
	tests := []struct {
		name, eco, v string
		want         bool
	}{
		{name: "npm version", eco: NPM, v: "1.2.3"},
		{name: "npm caret", eco: NPM, v: "^1", want: true},
		{name: "npm tilde", eco: NPM, v: "~1.2", want: true},
		{name: "deb tilde version", eco: Deb, v: "1.0~rc1"},
		{name: "deb relation", eco: Deb, v: ">= 1.0", want: true},
		{name: "oci tag", eco: OCI, v: "3.19-alpine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := Lookup(tt.eco)
			if got := e.MayBeRange(tt.v); got != tt.want {
				t.Errorf("%s MayBeRange(%q) = %v, want %v", tt.eco, tt.v, got, tt.want)
			}
		})
	}
}

func TestCheckName(t *testing.T) {
	tests := []struct {
		name, eco, in, err string
	}{
		{name: "plain", eco: NPM, in: "lodash"},
		{name: "scoped", eco: NPM, in: "@babel/core"},
		{name: "oci path", eco: OCI, in: "library/alpine"},
		{name: "empty", eco: NPM, in: "", err: "empty package name"},
		{name: "too long", eco: PyPI, in: string(make([]byte, MaxNameLen+1)), err: "longer than"},
		{name: "space", eco: PyPI, in: "a b", err: "character names cannot have"},
		{name: "newline", eco: NPM, in: "a\nb", err: "character names cannot have"},
		{name: "shell", eco: Cargo, in: "a;b", err: "character names cannot have"},
		{name: "scope outside npm", eco: PyPI, in: "@x/y", err: "only npm names have an @scope"},
		{name: "scope without name", eco: NPM, in: "@babel", err: "@scope/name"},
		{name: "scope with two slashes", eco: NPM, in: "@a/b/c", err: "@scope/name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := Lookup(tt.eco)
			err := e.CheckName(tt.in)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("%s CheckName(%q) = %v, want %q", tt.eco, tt.in, err, tt.err)
			}
		})
	}
}

func TestPick(t *testing.T) {
	tests := []struct {
		name, eco, spec string
		cands           []string
		tags            map[string]string
		want            string
		err             error
	}{
		{name: "npm latest tag", eco: NPM, spec: "^1", cands: []string{"1.0.0", "1.2.0"}, tags: map[string]string{"latest": "1.0.0"}, want: "1.0.0"},
		{name: "npm empty spec", eco: NPM, spec: "", cands: []string{"1.0.0", "1.2.0"}, want: "1.2.0"},
		{name: "npm no match", eco: NPM, spec: "^9", cands: []string{"1.0.0"}, err: ErrNoMatch},
		{name: "pypi best", eco: PyPI, spec: ">=1.0", cands: []string{"1.0", "2.0b1"}, want: "1.0"},
		{name: "pypi empty spec is the highest", eco: PyPI, spec: "", cands: []string{"1.0", "not a version", "2.0"}, want: "2.0"},
		{name: "pypi empty spec skips unparsable first", eco: PyPI, spec: "", cands: []string{"x y", "1.0"}, want: "1.0"},
		{name: "cargo none", eco: Cargo, spec: "", cands: nil, err: ErrNoMatch},
		{name: "oci tag", eco: OCI, spec: "3.19", cands: []string{"3.18", "3.19"}, want: "3.19"},
		{name: "oci empty is latest", eco: OCI, spec: "", cands: []string{"3.19", "latest"}, want: "latest"},
		{name: "oci missing tag", eco: OCI, spec: "3.20", cands: []string{"3.19"}, err: ErrNoMatch},
		{name: "unknown", eco: "nosuch", spec: "1", err: ErrUnknownEcosystem},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Pick(tt.eco, tt.spec, tt.cands, tt.tags)
			if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Errorf("Pick(%q, %q, %q) = %q, %v, want %q, %v", tt.eco, tt.spec, tt.cands, got, err, tt.want, tt.err)
			}
		})
	}
}
