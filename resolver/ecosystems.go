package resolver

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/resolver/ecosystem"
)

// The names of the ecosystems, which are also their purl types (defined in
// package ecosystem, the resolver's leaf).
const (
	NPM   = ecosystem.NPM
	PyPI  = ecosystem.PyPI
	Cargo = ecosystem.Cargo
	Deb   = ecosystem.Deb
	OCI   = ecosystem.OCI
)

// versionFactsOf are each ecosystem's facts that need a version parser, by name. The ecosystems
// themselves, their order and the rest of their facts are package ecosystem's one list
// (ecosystem.List), from which [Ecosystems] is built: an ecosystem of that list with no entry
// here, or an entry here of no ecosystem there, panics when the program starts.
var versionFactsOf = map[string]versionFacts{
	NPM:   {listing: Packument, grammar: npmGrammar{}, normalize: keepName, exact: exactSemver, rangeChars: rangeChars},
	PyPI:  {listing: SimpleAPI, grammar: pypiGrammar{}, normalize: normalizePEP503, exact: exactPEP440, rangeChars: rangeChars},
	Cargo: {listing: SparseIndex, grammar: cargoGrammar{}, normalize: normalizeCrate, exact: exactSemver, rangeChars: rangeChars},
	Deb:   {listing: NoListing, grammar: debGrammar{}, normalize: strings.ToLower, exact: exactPlain, rangeChars: debRangeChars},
	OCI:   {listing: NoListing, normalize: strings.ToLower, exact: exactPlain, rangeChars: rangeChars},
}

// ecosystems is [Ecosystems]: package ecosystem's list, each with its version facts.
var ecosystems = register(ecosystem.List(), versionFactsOf)

// register joins each ecosystem of infos with its version facts, in the order of infos. It
// panics if one lacks them, or if facts name an ecosystem that infos do not: the two are
// written together (resolver/README.md).
func register(infos []ecosystem.Info, facts map[string]versionFacts) []*Ecosystem {
	out := make([]*Ecosystem, 0, len(infos))
	for _, in := range infos {
		f, ok := facts[in.Name]
		if !ok {
			panic(fmt.Sprintf("resolver: ecosystem %q (resolver/ecosystem) has no version facts in resolver/ecosystems.go", in.Name))
		}
		out = append(out, &Ecosystem{info: in, versionFacts: f})
	}
	if len(out) != len(facts) {
		panic(fmt.Sprintf("resolver: resolver/ecosystems.go has version facts for %d ecosystems, resolver/ecosystem lists %d", len(facts), len(out)))
	}
	return out
}

// An Ecosystem is everything sandtrail knows about one package ecosystem: its name (also its
// purl type), what a purl namespace means, its package manager and the commands that run it,
// where the mirror serves it from which upstream, how its registry lists versions, how it
// compares names, and the syntax of its versions and ranges. The values are fixed; get them
// from [Ecosystems], [Lookup] or [FromPurl].
type Ecosystem struct {
	// info holds the facts that need no version parser (which the shim reads from package
	// ecosystem itself); the methods read them.
	info ecosystem.Info
	versionFacts
}

// versionFacts are an ecosystem's facts that need a version parser.
type versionFacts struct {
	listing    Listing
	grammar    grammar // nil: versions are tags, matched exactly and never ordered
	normalize  func(string) string
	exact      func(string) (string, bool)
	rangeChars string
}

// A Namespace says what the namespace of an ecosystem's purl (pkg:TYPE/NAMESPACE/NAME) is.
type Namespace = ecosystem.Namespace

// The kinds of purl namespace (defined in package ecosystem).
const (
	// NoNamespace: names have none (PyPI, Cargo).
	NoNamespace = ecosystem.NoNamespace
	// Scope: the namespace is an @scope, and part of the name: "@babel/core" (npm).
	Scope = ecosystem.Scope
	// Vendor: the namespace names the distribution (pkg:deb/debian/curl) and is not part of the
	// name (Debian).
	Vendor = ecosystem.Vendor
	// Path: the name is a repository path, and the namespace is its leading segments:
	// "library/alpine" (OCI).
	Path = ecosystem.Path
)

// A Listing is the protocol in which an ecosystem's registry lists a package's versions and
// their publish times (package policies/release reads them).
type Listing int

const (
	// NoListing: sandtrail reads no version listing for the ecosystem (Debian, OCI).
	NoListing Listing = iota
	// Packument: the npm registry's package document.
	Packument
	// SimpleAPI: PyPI's JSON simple API (PEP 691, with PEP 700's upload-time).
	SimpleAPI
	// SparseIndex: the crates.io sparse index.
	SparseIndex
)

// Ecosystems returns every ecosystem sandtrail knows, in a fixed order: npm, pypi, cargo, deb,
// oci.
func Ecosystems() []*Ecosystem { return slices.Clone(ecosystems) }

// Names returns the names of [Ecosystems], in order.
func Names() []string {
	names := make([]string, len(ecosystems))
	for i, e := range ecosystems {
		names[i] = e.info.Name
	}
	return names
}

// Known reports whether name is the name of a registered ecosystem.
func Known(name string) bool {
	_, err := Lookup(name)
	return err == nil
}

// Lookup returns the ecosystem with the given name, or an error wrapping ErrUnknownEcosystem.
func Lookup(name string) (*Ecosystem, error) {
	for _, e := range ecosystems {
		if e.info.Name == name {
			return e, nil
		}
	}
	return nil, fmt.Errorf("looking up %q: %w", name, ErrUnknownEcosystem)
}

// Name returns the ecosystem's name, which is also its purl type: "npm", "pypi", "cargo",
// "deb" or "oci".
func (e *Ecosystem) Name() string { return e.info.Name }

// Manager returns the package manager whose installs pkg events record: "npm", "pip",
// "cargo" or "apt"; "" for OCI, which has none.
func (e *Ecosystem) Manager() string { return e.info.Manager }

// Commands returns the commands that run the ecosystem's manager, which the shim stands in
// for: the manager's own name, then its aliases ("npm", "npx"; "pip", "pip3"; "cargo"; "apt",
// "apt-get"); none for OCI.
func (e *Ecosystem) Commands() []string { return e.info.Commands() }

// Namespace says what a purl namespace is in the ecosystem.
func (e *Ecosystem) Namespace() Namespace { return e.info.Namespace }

// MirrorPrefix returns the path the mirror serves the ecosystem beneath: "/npm/", "/pypi/",
// "/crates/", "/debian/" or "/v2/".
func (e *Ecosystem) MirrorPrefix() string { return e.info.MirrorPrefix }

// DefaultUpstream returns the registry the mirror fetches the ecosystem's packages from
// unless configured otherwise (registry.npmjs.org, PyPI's simple index, crates.io's sparse
// index, deb.debian.org's Debian archive, Docker Hub).
func (e *Ecosystem) DefaultUpstream() string { return e.info.Upstream }

// Listing says how the ecosystem's registry lists a package's versions.
func (e *Ecosystem) Listing() Listing { return e.listing }

// HasRanges reports whether the ecosystem's versions are ordered and have ranges (npm, PyPI,
// Cargo, Debian). OCI versions are tags: ParseVersion and ParseSpec fail for them with an error
// wrapping ErrNoOrder, and a tag matches only itself.
func (e *Ecosystem) HasRanges() bool { return e.grammar != nil }

// ParseVersion parses one version string.
func (e *Ecosystem) ParseVersion(s string) (Version, error) {
	if e.grammar == nil {
		return nil, fmt.Errorf("%s: %w", e.info.Name, ErrNoOrder)
	}
	return e.grammar.ParseVersion(s)
}

// ParseSpec parses a version spec (a range, requirement, specifier set or relation).
func (e *Ecosystem) ParseSpec(s string) (Spec, error) {
	if e.grammar == nil {
		return nil, fmt.Errorf("%s: %w", e.info.Name, ErrNoOrder)
	}
	return e.grammar.ParseSpec(s)
}

// ExactVersion reports whether spec names one exact version in the ecosystem's own syntax,
// and which: a full semver version for npm and Cargo ("1.2.3", or "v1.2.3" read as "1.2.3"; a
// partial "1.2" is a range), a PEP 440 version alone or after == or === for PyPI
// ("==4.12.2" is "4.12.2"; "==4.*" is a range), and a plain version or tag for Debian and OCI.
func (e *Ecosystem) ExactVersion(spec string) (string, bool) { return e.exact(spec) }

// MayBeRange reports whether v holds a character that only a range, never a version, has
// (a space, a comparison operator, ^ ~ * , or |). Debian versions may hold ~, so for them only
// the characters of apt relations count.
func (e *Ecosystem) MayBeRange(v string) bool { return strings.ContainsAny(v, e.rangeChars) }

const (
	rangeChars    = " \t<>=^~*,|"
	debRangeChars = " \t<>=,|"
)
