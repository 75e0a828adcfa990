package npm

import (
	"fmt"
	"strings"
)

// MaxSatisfying returns the index of the highest candidate that satisfies r (the first of equal
// ones), or -1, as node-semver's maxSatisfying does. Candidates that do not parse are skipped.
func MaxSatisfying(r *Range, candidates []string) int {
	best := -1
	var bestV *Version
	for i, c := range candidates {
		v, err := ParseVersion(c, r.opts)
		if err != nil || !r.Test(v) {
			continue
		}
		if bestV == nil || bestV.Compare(v) < 0 {
			best, bestV = i, v
		}
	}
	return best
}

// BestWithTags picks a version for spec from candidates the way npm install does
// (npm-package-arg classifies the spec, npm-pick-manifest picks), given the package's dist-tags
// (e.g. {"latest": "1.4.2", "next": "2.0.0-rc.1"}):
//
//   - a spec that is a version (loose, e.g. "v1.2.3") picks exactly that version;
//   - a spec that is a range picks the "latest" tag's version if it satisfies the range (or the
//     spec is "*"), and otherwise the highest satisfying version;
//   - any other spec is a dist-tag name ("latest", "next") and picks the tag's version. An empty
//     spec is "*": the "latest" tag's version if it is among the candidates, else the highest.
//
// The version picked must be among the candidates, and an exact version must be spelled in
// its normalized form there, as a packument's keys are. It returns the candidate as given, or an
// error wrapping ErrNoMatch when nothing fits, or ErrInvalidRange for a spec that is neither a
// version, a range nor a valid tag name. Deprecation, engines and publish times, which npm also
// weighs, are not considered.
func BestWithTags(spec string, candidates []string, tags map[string]string) (string, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		spec = "*" // npm-pick-manifest treats no spec as the range "*", preferring "latest"
	}
	if v, err := ParseVersion(spec, NPM); err == nil {
		for _, c := range candidates {
			if c == v.String() {
				return c, nil
			}
		}
		return "", fmt.Errorf("picking version %q: %w", spec, ErrNoMatch)
	}
	r, err := ParseRange(spec, NPM)
	if err != nil {
		if !uriComponentSafe(spec) {
			return "", fmt.Errorf("picking %q: not a version, range or dist-tag: %w", spec, ErrInvalidRange)
		}
		want, ok := tags[spec]
		if ok {
			for _, c := range candidates {
				if c == want {
					return c, nil
				}
			}
		}
		return "", fmt.Errorf("picking dist-tag %q: %w", spec, ErrNoMatch)
	}
	if latest, ok := tags["latest"]; ok {
		for _, c := range candidates {
			if c != latest {
				continue
			}
			if spec == "*" {
				return c, nil
			}
			if v, err := ParseVersion(c, NPM); err == nil && r.Test(v) {
				return c, nil
			}
		}
	}
	if i := MaxSatisfying(r, candidates); i >= 0 {
		return candidates[i], nil
	}
	return "", fmt.Errorf("picking range %q: %w", spec, ErrNoMatch)
}

// uriComponentSafe reports whether encodeURIComponent(s) === s, npm-package-arg's test of a
// dist-tag name.
func uriComponentSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strings.IndexByte("-_.!~*'()", c) >= 0 {
			continue
		}
		return false
	}
	return true
}
