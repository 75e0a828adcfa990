package query

import (
	"errors"
	"fmt"

	"github.com/sandtrail/sandtrail/resolver"
)

// parseRange parses spec as a version range of eco with the resolver.
func parseRange(eco, spec string) (*resolver.Ecosystem, resolver.Spec, error) {
	e, err := resolver.Lookup(eco)
	if errors.Is(err, resolver.ErrUnknownEcosystem) {
		return nil, nil, fmt.Errorf("the resolver has no %s ranges in this build", eco)
	}
	if err != nil {
		return nil, nil, err
	}
	s, err := e.ParseSpec(spec)
	if err != nil {
		return nil, nil, err
	}
	return e, s, nil
}

// matchRange reports whether version satisfies p's range. A recorded
// version that the ecosystem cannot parse does not satisfy it.
func (p *PackageMatch) matchRange(version string) bool {
	if p.spec == nil {
		return false
	}
	v, err := p.eco.ParseVersion(version)
	if err != nil {
		return false
	}
	return p.spec.Match(v)
}
