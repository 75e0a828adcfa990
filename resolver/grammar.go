package resolver

import (
	"errors"
	"fmt"

	"github.com/sandtrail/sandtrail/resolver/cargo"
	"github.com/sandtrail/sandtrail/resolver/deb"
	"github.com/sandtrail/sandtrail/resolver/npm"
	"github.com/sandtrail/sandtrail/resolver/pep440"
)

// A grammar parses one ecosystem's versions and specs. Each adapter below wraps one subpackage.
type grammar interface {
	ParseVersion(string) (Version, error)
	ParseSpec(string) (Spec, error)
}

// A tagPicker is an optional ability of a grammar whose client picks among candidates with the
// registry's tags (npm's dist-tags) rather than by [Best]. An empty spec means any version.
type tagPicker interface {
	pickTagged(spec string, candidates []string, tags map[string]string) (string, error)
}

// debGrammar adapts package deb: Debian versions and apt/dpkg relations.
type debGrammar struct{}

var _ grammar = debGrammar{}

type debVersion struct{ v deb.Version }

type debSpec struct{ r deb.Relation }

func (debGrammar) ParseVersion(s string) (Version, error) {
	v, err := deb.Parse(s)
	if err != nil {
		return nil, err
	}
	return debVersion{v}, nil
}

func (debGrammar) ParseSpec(s string) (Spec, error) {
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

// npmGrammar adapts package npm in npm's own mode (node-semver with loose: true).
type npmGrammar struct{}

var (
	_ grammar   = npmGrammar{}
	_ tagPicker = npmGrammar{}
)

type npmVersion struct{ v *npm.Version }

type npmSpec struct{ r *npm.Range }

func (npmGrammar) ParseVersion(s string) (Version, error) {
	v, err := npm.ParseVersion(s, npm.NPM)
	if err != nil {
		return nil, err
	}
	return npmVersion{v}, nil
}

func (npmGrammar) ParseSpec(s string) (Spec, error) {
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

// pickTagged picks as npm-pick-manifest does (npm.BestWithTags): a dist-tag named by the spec,
// else the "latest" tag when it satisfies the range, else the highest match.
func (npmGrammar) pickTagged(spec string, candidates []string, tags map[string]string) (string, error) {
	v, err := npm.BestWithTags(spec, candidates, tags)
	if errors.Is(err, npm.ErrNoMatch) {
		return "", fmt.Errorf("%v: %w", err, ErrNoMatch)
	}
	return v, err
}

// cargoGrammar adapts package cargo: the semver crate's versions and requirements.
type cargoGrammar struct{}

var _ grammar = cargoGrammar{}

type cargoVersion struct{ v *cargo.Version }

type cargoSpec struct{ r *cargo.Req }

func (cargoGrammar) ParseVersion(s string) (Version, error) {
	v, err := cargo.ParseVersion(s)
	if err != nil {
		return nil, err
	}
	return cargoVersion{v}, nil
}

func (cargoGrammar) ParseSpec(s string) (Spec, error) {
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

// pypiGrammar adapts package pep440: PEP 440 versions and specifier sets, with pip's choice
// among candidates as the Selector.
type pypiGrammar struct{}

type pypiVersion struct{ v *pep440.Version }

type pypiSpec struct{ s *pep440.Specifiers }

var (
	_ grammar  = pypiGrammar{}
	_ Selector = pypiSpec{}
)

func (pypiGrammar) ParseVersion(s string) (Version, error) {
	v, err := pep440.Parse(s)
	if err != nil {
		return nil, err
	}
	return pypiVersion{v}, nil
}

func (pypiGrammar) ParseSpec(s string) (Spec, error) {
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
