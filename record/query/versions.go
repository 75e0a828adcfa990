package query

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
