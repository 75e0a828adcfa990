package query

import "errors"

// errNoRanges is returned until version ranges are wired to the resolver.
var errNoRanges = errors.New("version ranges are not available in this build")

// matchRange reports whether version satisfies the range spec of eco.
func matchRange(eco, spec, version string) (bool, error) {
	return false, errNoRanges
}

// checkRange reports whether spec is a valid range of eco.
func checkRange(eco, spec string) error {
	return errNoRanges
}
