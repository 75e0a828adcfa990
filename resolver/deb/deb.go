// Package deb parses and orders Debian package versions ([epoch:]upstream[-revision]) exactly
// as dpkg does, and matches them against apt/dpkg version relations (<< <= = >= >>).
//
// Parse follows dpkg's parseversion: what dpkg rejects with an error, or accepts with a "bad
// syntax" warning, Parse rejects. Ordering is dpkg's verrevcmp, through pault.ag/go/debian/version.
package deb

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"pault.ag/go/debian/version"
)

// ErrSyntax is wrapped by every error that Parse and ParseRelation return.
var ErrSyntax = errors.New("deb: invalid syntax")

// A Version is a parsed Debian version.
type Version struct {
	v version.Version
}

// Epoch returns the version's epoch (0 when absent).
func (v Version) Epoch() int { return int(v.v.Epoch) }

// Upstream returns the upstream part of the version.
func (v Version) Upstream() string { return v.v.Version }

// Revision returns the Debian revision, or "" when absent.
func (v Version) Revision() string { return v.v.Revision }

// String returns the version in canonical form: the epoch only when non-zero or when the
// upstream part contains a colon (which would otherwise be read as the epoch's).
func (v Version) String() string {
	s := v.v.Version
	if v.v.Revision != "" {
		s += "-" + v.v.Revision
	}
	if v.v.Epoch != 0 || strings.Contains(v.v.Version, ":") {
		s = fmt.Sprintf("%d:%s", v.v.Epoch, s)
	}
	return s
}

// Compare orders v against o as dpkg --compare-versions does: -1, 0 or +1.
func (v Version) Compare(o Version) int {
	c := version.Compare(v.v, o.v)
	switch {
	case c < 0:
		return -1
	case c > 0:
		return 1
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isBlank(c byte) bool { return c == ' ' || c == '\t' }
func isSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

func syntaxErr(s, why string) error {
	return fmt.Errorf("parsing version %q: %s: %w", s, why, ErrSyntax)
}

// Parse parses a Debian version with dpkg's rules. Leading blanks and trailing white space are
// ignored. It returns an error wrapping ErrSyntax for: an empty version, embedded white space, an
// epoch that is empty, not a number, negative or above 2^31-1, nothing after the epoch's colon, an
// empty upstream version or revision, an upstream version that does not start with a digit, and
// characters outside [0-9A-Za-z.+~-:] (upstream) or [0-9A-Za-z.+~] (revision).
func Parse(s string) (Version, error) {
	i := 0
	for i < len(s) && isBlank(s[i]) {
		i++
	}
	str := s[i:]
	if str == "" {
		return Version{}, syntaxErr(s, "version string is empty")
	}
	end := 0
	for end < len(str) && !isSpace(str[end]) {
		end++
	}
	for p := end; p < len(str); p++ {
		if !isSpace(str[p]) {
			return Version{}, syntaxErr(s, "version string has embedded spaces")
		}
	}
	str = str[:end]
	var out version.Version
	if colon := strings.IndexByte(str, ':'); colon >= 0 {
		epoch, err := parseEpoch(str[:colon])
		if err != nil {
			return Version{}, syntaxErr(s, err.Error())
		}
		if colon+1 == len(str) {
			return Version{}, syntaxErr(s, "nothing after colon in version number")
		}
		out.Epoch = uint(epoch)
		str = str[colon+1:]
	}
	up, rev := str, ""
	if h := strings.LastIndexByte(str, '-'); h >= 0 {
		up, rev = str[:h], str[h+1:]
		if rev == "" {
			return Version{}, syntaxErr(s, "revision number is empty")
		}
	}
	if up == "" {
		return Version{}, syntaxErr(s, "version number is empty")
	}
	if !isDigit(up[0]) {
		return Version{}, syntaxErr(s, "version number does not start with digit")
	}
	for j := 1; j < len(up); j++ {
		c := up[j]
		if !isDigit(c) && !isAlpha(c) && !strings.ContainsRune(".-+~:", rune(c)) {
			return Version{}, syntaxErr(s, "invalid character in version number")
		}
	}
	for j := 0; j < len(rev); j++ {
		c := rev[j]
		if !isDigit(c) && !isAlpha(c) && !strings.ContainsRune(".+~", rune(c)) {
			return Version{}, syntaxErr(s, "invalid character in revision number")
		}
	}
	out.Version, out.Revision = up, rev
	return Version{v: out}, nil
}

// parseEpoch mirrors dpkg's use of strtol: an optional sign, then decimal digits, which must
// reach the colon.
func parseEpoch(s string) (int64, error) {
	i, neg := 0, false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i == len(s) || !isDigit(s[i]) {
		return 0, errors.New("epoch in version is empty")
	}
	var n int64
	for ; i < len(s) && isDigit(s[i]); i++ {
		if n <= math.MaxInt32 {
			n = n*10 + int64(s[i]-'0')
		}
	}
	switch {
	case i != len(s):
		return 0, errors.New("epoch in version is not number")
	case neg && n != 0:
		return 0, errors.New("epoch in version is negative")
	case n > math.MaxInt32:
		return 0, errors.New("epoch in version is too big")
	}
	return n, nil
}
