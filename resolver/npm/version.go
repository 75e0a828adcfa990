// Package npm parses versions and ranges exactly as node-semver does, in the mode that npm itself
// uses (npm-pick-manifest calls semver.satisfies with {loose: true}), and picks versions as npm
// does, including dist-tags.
//
// This is a port of node-semver 7.x (classes/semver.js, classes/range.js, classes/comparator.js),
// not a reimplementation: ranges are rewritten into comparator sets by the same regular
// expressions and the same string rewriting, so that odd inputs behave as they do in npm.
// Masterminds/semver/v3 is not used here because its constraints differ from node-semver in
// prerelease matching, hyphen ranges with partial versions, loose versions and "," lists
// (docs/resolver.md lists each difference, and masterminds_test.go proves them).
package npm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
)

// ErrInvalidVersion is wrapped by the errors of ParseVersion.
var ErrInvalidVersion = errors.New("npm: invalid version")

// ErrInvalidRange is wrapped by the errors of ParseRange.
var ErrInvalidRange = errors.New("npm: invalid range")

// ErrNoMatch is returned by BestWithTags when nothing matches.
var ErrNoMatch = errors.New("npm: no version matches")

// Options are node-semver's options.
type Options struct {
	// Loose accepts the forgiving syntax ("=1.2.3", "1.2.3beta", leading zeros) and, in ranges,
	// drops comparators that do not parse. npm always parses with Loose.
	Loose bool
	// IncludePrerelease lets prereleases match any range that their release would match.
	IncludePrerelease bool
}

// NPM is the mode npm itself uses: Loose, without IncludePrerelease.
var NPM = Options{Loose: true}

// ident is one prerelease identifier: a JavaScript number when it is numeric and below
// 2^53-1, as in node-semver, or else a string.
type ident struct {
	s   string
	n   float64
	num bool
}

func (a ident) same(b ident) bool {
	if a.num != b.num {
		return false
	}
	if a.num {
		return a.n == b.n
	}
	return a.s == b.s
}

// compareIdents is internal/identifiers.js's compareIdentifiers.
func compareIdents(a, b ident) int {
	if a.num && b.num {
		return cmpFloat(a.n, b.n)
	}
	anum := a.num || reNumeric().MatchString(a.s)
	bnum := b.num || reNumeric().MatchString(b.s)
	if anum && bnum {
		return cmpFloat(a.value(), b.value())
	}
	switch {
	case anum && !bnum:
		return -1
	case bnum && !anum:
		return 1
	case a.s == b.s:
		return 0
	case a.s < b.s:
		return -1
	}
	return 1
}

func (a ident) value() float64 {
	if a.num {
		return a.n
	}
	return jsNumber(a.s)
}

func (a ident) String() string {
	if a.num {
		return formatJS(a.n)
	}
	return a.s
}

func cmpFloat(a, b float64) int {
	switch {
	case a == b:
		return 0
	case a < b:
		return -1
	}
	return 1
}

// jsNumber is JavaScript's unary + on a string of decimal digits.
func jsNumber(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0
	}
	return f
}

// formatJS formats an integral number as JavaScript's String(n) does.
func formatJS(f float64) string {
	if f < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// jsIncr is node-semver's `${+s + 1}`.
func jsIncr(s string) string { return formatJS(jsNumber(s) + 1) }

// A Version is a parsed npm (semver 2.0) version.
type Version struct {
	major, minor, patch float64
	pre                 []ident
	build               []string
	version             string
}

func jsLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r) // 1 or 2; invalid UTF-8 decodes to U+FFFD, one unit
	}
	return n
}

// ParseVersion parses a version as new SemVer(s, opts) does. With Loose it accepts leading
// "v", "=" and white space, leading zeros and a prerelease without its "-". It returns an error
// wrapping ErrInvalidVersion for anything else, for versions longer than 256 characters and for
// numbers above 2^53-1.
func ParseVersion(s string, opts Options) (*Version, error) {
	if jsLen(s) > maxLength {
		return nil, fmt.Errorf("parsing version: longer than %d characters: %w", maxLength, ErrInvalidVersion)
	}
	re := reFull()
	if opts.Loose {
		re = reLoose()
	}
	m := re.FindStringSubmatch(jsTrim(s))
	if m == nil {
		return nil, fmt.Errorf("parsing version %q: %w", s, ErrInvalidVersion)
	}
	v := &Version{major: jsNumber(m[1]), minor: jsNumber(m[2]), patch: jsNumber(m[3])}
	for _, n := range []float64{v.major, v.minor, v.patch} {
		if n > maxSafeInteger {
			return nil, fmt.Errorf("parsing version %q: number above 2^53-1: %w", s, ErrInvalidVersion)
		}
	}
	if m[4] != "" {
		for _, id := range strings.Split(m[4], ".") {
			if reNumeric().MatchString(id) {
				if n := jsNumber(id); n < maxSafeInteger {
					v.pre = append(v.pre, ident{n: n, num: true})
					continue
				}
			}
			v.pre = append(v.pre, ident{s: id})
		}
	}
	if m[5] != "" {
		v.build = strings.Split(m[5], ".")
	}
	v.version = formatJS(v.major) + "." + formatJS(v.minor) + "." + formatJS(v.patch)
	if len(v.pre) > 0 {
		ids := make([]string, len(v.pre))
		for i, id := range v.pre {
			ids[i] = id.String()
		}
		v.version += "-" + strings.Join(ids, ".")
	}
	return v, nil
}

// String returns the normalized version, without build metadata, as node-semver formats it.
func (v *Version) String() string { return v.version }

// Major, Minor and Patch return the version's numbers.
func (v *Version) Major() uint64 { return uint64(v.major) }

// Minor returns the minor number.
func (v *Version) Minor() uint64 { return uint64(v.minor) }

// Patch returns the patch number.
func (v *Version) Patch() uint64 { return uint64(v.patch) }

// Prerelease reports whether the version has prerelease identifiers.
func (v *Version) Prerelease() bool { return len(v.pre) > 0 }

// Compare orders v against o by semver precedence (build metadata ignored): -1, 0 or +1.
func (v *Version) Compare(o *Version) int {
	if v.version == o.version {
		return 0
	}
	if c := cmpFloat(v.major, o.major); c != 0 {
		return c
	}
	if c := cmpFloat(v.minor, o.minor); c != 0 {
		return c
	}
	if c := cmpFloat(v.patch, o.patch); c != 0 {
		return c
	}
	return comparePre(v.pre, o.pre)
}

func comparePre(a, b []ident) int {
	switch {
	case len(a) > 0 && len(b) == 0:
		return -1
	case len(a) == 0 && len(b) > 0:
		return 1
	case len(a) == 0 && len(b) == 0:
		return 0
	}
	for i := 0; ; i++ {
		switch {
		case i >= len(a) && i >= len(b):
			return 0
		case i >= len(b):
			return 1
		case i >= len(a):
			return -1
		case a[i].same(b[i]):
			continue
		}
		return compareIdents(a[i], b[i])
	}
}
