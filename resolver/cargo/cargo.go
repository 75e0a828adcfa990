// Package cargo parses versions and version requirements as Cargo does (the semver crate,
// version 1.x, that Cargo uses), and matches them with Cargo's rules: a bare version is a caret
// requirement, comparators are joined with commas, and a prerelease matches only a requirement
// that names a prerelease of the same major.minor.patch.
//
// Versions are held as Masterminds/semver/v3 versions and ordered with its Compare, which agrees
// with the semver crate except for numeric prerelease identifiers above 2^64-1, which Masterminds
// compares as text (Compare handles that case itself; docs/resolver.md lists the difference).
// Requirements are not Masterminds constraints: Masterminds reads "1.2.3" as "=1.2.3" and matches
// prereleases differently, so they are parsed and evaluated here, after the semver crate's
// parse.rs and eval.rs.
package cargo

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// ErrInvalidVersion is wrapped by the errors of ParseVersion.
var ErrInvalidVersion = errors.New("cargo: invalid version")

// ErrInvalidReq is wrapped by the errors of ParseReq.
var ErrInvalidReq = errors.New("cargo: invalid version requirement")

// maxComparators is the semver crate's limit on comparators in one requirement.
const maxComparators = 32

// A Version is a parsed Cargo (semver 2.0) version.
type Version struct {
	sv  *semver.Version
	pre []string
}

// ParseVersion parses a semver 2.0 version exactly ("1.2.3", "1.0.0-alpha.1+build"): no "v"
// prefix, no white space, no leading zeros, numbers up to 2^64-1. Errors wrap ErrInvalidVersion.
func ParseVersion(s string) (*Version, error) {
	if s == "" {
		return nil, fmt.Errorf("parsing version: empty: %w", ErrInvalidVersion)
	}
	var nums [3]uint64
	text := s
	var err error
	for i := range nums {
		if i > 0 {
			if !strings.HasPrefix(text, ".") {
				return nil, fmt.Errorf("parsing version %q: expected '.': %w", s, ErrInvalidVersion)
			}
			text = text[1:]
		}
		if nums[i], text, err = numeric(text); err != nil {
			return nil, fmt.Errorf("parsing version %q: %w", s, err)
		}
	}
	var pre, build string
	if strings.HasPrefix(text, "-") {
		if pre, text, err = identifier(text[1:], true); err != nil || pre == "" {
			return nil, fmt.Errorf("parsing version %q: bad prerelease: %w", s, ErrInvalidVersion)
		}
	}
	if strings.HasPrefix(text, "+") {
		if build, text, err = identifier(text[1:], false); err != nil || build == "" {
			return nil, fmt.Errorf("parsing version %q: bad build metadata: %w", s, ErrInvalidVersion)
		}
	}
	if text != "" {
		return nil, fmt.Errorf("parsing version %q: unexpected %q: %w", s, text, ErrInvalidVersion)
	}
	return newVersion(nums[0], nums[1], nums[2], pre, build), nil
}

func newVersion(major, minor, patch uint64, pre, build string) *Version {
	v := &Version{sv: semver.New(major, minor, patch, pre, build)}
	if pre != "" {
		v.pre = strings.Split(pre, ".")
	}
	return v
}

// numeric parses a decimal number without leading zeros that fits in 64 bits.
func numeric(s string) (uint64, string, error) {
	var n uint64
	i := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if n == 0 && i > 0 {
			return 0, s, fmt.Errorf("leading zero: %w", ErrInvalidVersion)
		}
		d := uint64(s[i] - '0')
		if n > (1<<64-1-d)/10 {
			return 0, s, fmt.Errorf("number overflows 64 bits: %w", ErrInvalidVersion)
		}
		n = n*10 + d
	}
	if i == 0 {
		return 0, s, fmt.Errorf("expected a number: %w", ErrInvalidVersion)
	}
	return n, s[i:], nil
}

// identifier scans dot-separated [0-9A-Za-z-]+ segments, as the semver crate's identifier does;
// numeric prerelease segments must not have leading zeros.
func identifier(s string, pre bool) (string, string, error) {
	acc, seg, nondigit := 0, 0, false
	for {
		var c byte
		if acc+seg < len(s) {
			c = s[acc+seg]
		}
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c == '-':
			seg++
			nondigit = true
			continue
		case c >= '0' && c <= '9':
			seg++
			continue
		}
		if seg == 0 {
			if acc == 0 && c != '.' {
				return "", s, nil
			}
			return "", s, fmt.Errorf("empty identifier segment: %w", ErrInvalidVersion)
		}
		if pre && seg > 1 && !nondigit && s[acc] == '0' {
			return "", s, fmt.Errorf("leading zero in prerelease: %w", ErrInvalidVersion)
		}
		acc += seg
		if c != '.' {
			return s[:acc], s[acc:], nil
		}
		acc++
		seg, nondigit = 0, false
	}
}

// String returns the version as written in canonical form.
func (v *Version) String() string { return v.sv.String() }

// Semver returns the version as a Masterminds/semver/v3 version.
func (v *Version) Semver() *semver.Version { return v.sv }

// Compare orders v against o by semver precedence (build metadata ignored): -1, 0 or +1.
func (v *Version) Compare(o *Version) int {
	if !hugeNumeric(v.pre) && !hugeNumeric(o.pre) {
		return v.sv.Compare(o.sv)
	}
	for _, c := range []int{cmp.Compare(v.sv.Major(), o.sv.Major()), cmp.Compare(v.sv.Minor(), o.sv.Minor()), cmp.Compare(v.sv.Patch(), o.sv.Patch())} {
		if c != 0 {
			return c
		}
	}
	return comparePre(v.pre, o.pre)
}

// hugeNumeric reports whether a numeric identifier is too long for Masterminds' uint64 parse.
func hugeNumeric(pre []string) bool {
	for _, id := range pre {
		if len(id) > 19 && isNumeric(id) {
			return true
		}
	}
	return false
}

func isNumeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// comparePre is the semver crate's Ord for Prerelease: an empty prerelease is greatest; numeric
// identifiers (of any length) sort numerically and before alphanumeric ones.
func comparePre(a, b []string) int {
	switch {
	case len(a) == 0 && len(b) == 0:
		return 0
	case len(a) == 0:
		return 1
	case len(b) == 0:
		return -1
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		xn, yn := isNumeric(x), isNumeric(y)
		var c int
		switch {
		case xn && yn:
			c = cmp.Compare(len(x), len(y))
			if c == 0 {
				c = strings.Compare(x, y)
			}
		case xn:
			c = -1
		case yn:
			c = 1
		default:
			c = strings.Compare(x, y)
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}
