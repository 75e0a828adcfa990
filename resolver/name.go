package resolver

import (
	"regexp"
	"strings"
)

var pypiSeparators = regexp.MustCompile(`[-_.]+`)

// NormalizeName returns name as ecosystem compares package names, so that two spellings the
// ecosystem treats as one package become one string: PEP 503 for "pypi" (lower case, runs of
// -, _ and . become -), lower case with - for _ for "cargo" (crates.io treats them as the same
// crate), lower case for "deb" and "oci", and the name as written for "npm" (whose names are
// case-sensitive) and for any other ecosystem.
func NormalizeName(ecosystem, name string) string {
	switch ecosystem {
	case "pypi":
		return pypiSeparators.ReplaceAllString(strings.ToLower(name), "-")
	case "cargo":
		return strings.ReplaceAll(strings.ToLower(name), "_", "-")
	case "deb", "oci":
		return strings.ToLower(name)
	}
	return name
}
