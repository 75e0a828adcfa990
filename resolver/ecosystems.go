package resolver

import (
	"github.com/sandtrail/sandtrail/resolver/deb"
)

// Ecosystems returns every supported ecosystem, in a fixed order. This list is the one place
// where ecosystems are registered.
func Ecosystems() []Ecosystem {
	return []Ecosystem{
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
