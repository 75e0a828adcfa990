package resolver

import (
	"github.com/sandtrail/sandtrail/resolver/cargo"
	"github.com/sandtrail/sandtrail/resolver/deb"
	"github.com/sandtrail/sandtrail/resolver/npm"
	"github.com/sandtrail/sandtrail/resolver/pep440"
)

// Ecosystems returns every supported ecosystem, in a fixed order. This list is the one place
// where ecosystems are registered.
func Ecosystems() []Ecosystem {
	return []Ecosystem{
		npmEcosystem{},
		cargoEcosystem{},
		pypiEcosystem{},
		debEcosystem{},
	}
}

// debEcosystem adapts package deb: Debian versions and apt/dpkg relations.
type debEcosystem struct{}

type debVersion struct{ v deb.Version }

type debSpec struct{ r deb.Relation }

var _ Ecosystem = debEcosystem{}

func (debEcosystem) Name() string { return "deb" }

func (debEcosystem) ParseVersion(s string) (Version, error) {
	v, err := deb.Parse(s)
	if err != nil {
		return nil, err
	}
	return debVersion{v}, nil
}

func (debEcosystem) ParseSpec(s string) (Spec, error) {
	r, err := deb.ParseRelation(s)
	if err != nil {
		return nil, err
	}
	return debSpec{r}, nil
}

func (v debVersion) String() string        { return v.v.String() }
func (v debVersion) Compare(o Version) int { return v.v.Compare(o.(debVersion).v) }
func (s debSpec) String() string           { return s.r.String() }
func (s debSpec) Match(v Version) bool     { return s.r.Match(v.(debVersion).v) }

// npmEcosystem adapts package npm in npm's own mode (node-semver with loose: true).
type npmEcosystem struct{}

type npmVersion struct{ v *npm.Version }

type npmSpec struct{ r *npm.Range }

var _ Ecosystem = npmEcosystem{}

func (npmEcosystem) Name() string { return "npm" }

func (npmEcosystem) ParseVersion(s string) (Version, error) {
	v, err := npm.ParseVersion(s, npm.NPM)
	if err != nil {
		return nil, err
	}
	return npmVersion{v}, nil
}

func (npmEcosystem) ParseSpec(s string) (Spec, error) {
	r, err := npm.ParseRange(s, npm.NPM)
	if err != nil {
		return nil, err
	}
	return npmSpec{r}, nil
}

func (v npmVersion) String() string        { return v.v.String() }
func (v npmVersion) Compare(o Version) int { return v.v.Compare(o.(npmVersion).v) }
func (s npmSpec) String() string           { return s.r.String() }
func (s npmSpec) Match(v Version) bool     { return s.r.Test(v.(npmVersion).v) }

// cargoEcosystem adapts package cargo: the semver crate's versions and requirements.
type cargoEcosystem struct{}

type cargoVersion struct{ v *cargo.Version }

type cargoSpec struct{ r *cargo.Req }

var _ Ecosystem = cargoEcosystem{}

func (cargoEcosystem) Name() string { return "cargo" }

func (cargoEcosystem) ParseVersion(s string) (Version, error) {
	v, err := cargo.ParseVersion(s)
	if err != nil {
		return nil, err
	}
	return cargoVersion{v}, nil
}

func (cargoEcosystem) ParseSpec(s string) (Spec, error) {
	r, err := cargo.ParseReq(s)
	if err != nil {
		return nil, err
	}
	return cargoSpec{r}, nil
}

func (v cargoVersion) String() string        { return v.v.String() }
func (v cargoVersion) Compare(o Version) int { return v.v.Compare(o.(cargoVersion).v) }
func (s cargoSpec) String() string           { return s.r.String() }
func (s cargoSpec) Match(v Version) bool     { return s.r.Match(v.(cargoVersion).v) }

// pypiEcosystem adapts package pep440: PEP 440 versions and specifier sets, with pip's choice
// among candidates as the Selector.
type pypiEcosystem struct{}

type pypiVersion struct{ v *pep440.Version }

type pypiSpec struct{ s *pep440.Specifiers }

var (
	_ Ecosystem = pypiEcosystem{}
	_ Selector  = pypiSpec{}
)

func (pypiEcosystem) Name() string { return "pypi" }

func (pypiEcosystem) ParseVersion(s string) (Version, error) {
	v, err := pep440.Parse(s)
	if err != nil {
		return nil, err
	}
	return pypiVersion{v}, nil
}

func (pypiEcosystem) ParseSpec(s string) (Spec, error) {
	sp, err := pep440.ParseSpecifiers(s)
	if err != nil {
		return nil, err
	}
	return pypiSpec{sp}, nil
}

func (v pypiVersion) String() string        { return v.v.String() }
func (v pypiVersion) Compare(o Version) int { return v.v.Compare(o.(pypiVersion).v) }
func (s pypiSpec) String() string           { return s.s.String() }
func (s pypiSpec) Match(v Version) bool     { return s.s.Contains(v.(pypiVersion).v) }

// Select picks as pip does: the highest of SpecifierSet.filter(candidates).
func (s pypiSpec) Select(candidates []Version) int {
	vs := make([]*pep440.Version, len(candidates))
	for i, c := range candidates {
		vs[i] = c.(pypiVersion).v
	}
	return s.s.Best(vs)
}
