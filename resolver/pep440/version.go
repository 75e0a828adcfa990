// Package pep440 parses, orders and matches Python package versions and version specifiers
// (PEP 440) exactly as pip does: the rules are those of the packaging library that pip 23
// vendors (pip._vendor.packaging 21.3), which a differential test runs as the oracle.
//
// Versions have an epoch ("1!"), a release ("1.2.3"), and optional pre ("a1", "rc2"), post
// (".post1", "-1") and dev (".dev0") parts and a local label ("+ubuntu.1"); alternative spellings
// ("alpha", "c", "rev", "-", "_") are normalized. Specifiers are comma-separated clauses with
// ~= == != <= >= < > and ===, where == and != accept a ".*" suffix.
//
// Strict by design: packaging 21.3 falls back to LegacyVersion and LegacySpecifier for input
// that is not PEP 440 (both deprecated there and removed in packaging 22); this package rejects
// such input instead. It also rejects non-ASCII characters other than white space.
package pep440

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// ErrInvalidVersion is wrapped by the errors of Parse.
var ErrInvalidVersion = errors.New("pep440: invalid version")

// ErrInvalidSpecifier is wrapped by the errors of ParseSpecifiers.
var ErrInvalidSpecifier = errors.New("pep440: invalid specifier")

// pySpace is the body of a character class matching Python's \s (str.isspace).
const pySpace = `\t\n\v\f\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`

func isPySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

func pyStrip(s string) string { return strings.TrimFunc(s, isPySpace) }

// versionPattern is packaging's VERSION_PATTERN (compiled case-insensitively).
const versionPattern = `v?` +
	`(?:` +
	`(?:(?P<epoch>[0-9]+)!)?` +
	`(?P<release>[0-9]+(?:\.[0-9]+)*)` +
	`(?P<pre>[-_\.]?(?P<pre_l>(a|b|c|rc|alpha|beta|pre|preview))[-_\.]?(?P<pre_n>[0-9]+)?)?` +
	`(?P<post>(?:-(?P<post_n1>[0-9]+))|(?:[-_\.]?(?P<post_l>post|rev|r)[-_\.]?(?P<post_n2>[0-9]+)?))?` +
	`(?P<dev>[-_\.]?(?P<dev_l>dev)[-_\.]?(?P<dev_n>[0-9]+)?)?` +
	`)` +
	`(?:\+(?P<local>[a-z0-9]+(?:[-_\.][a-z0-9]+)*))?`

var (
	reVersion    = regexp.MustCompile(`(?i)^[` + pySpace + `]*` + versionPattern + `[` + pySpace + `]*$`)
	reLocalSplit = regexp.MustCompile(`[\._-]`)
)

// num is a non-negative integer of any size in canonical decimal form (no leading zeros).
type num string

func newNum(digits string) num {
	d := strings.TrimLeft(digits, "0")
	if d == "" {
		d = "0"
	}
	return num(d)
}

func (a num) cmp(b num) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(string(a), string(b))
}

// A letterNum is a pre, post or dev part: a normalized letter and a number.
type letterNum struct {
	letter string
	n      num
}

// A localPart is a numeric or (lower-cased) alphanumeric segment of a local label.
type localPart struct {
	s       string
	numeric bool
}

// A Version is a parsed PEP 440 version.
type Version struct {
	epoch   num
	release []num
	pre     *letterNum
	post    *letterNum
	dev     *letterNum
	local   []localPart
}

func asciiOrSpace(s string) bool {
	for _, r := range s {
		if r >= 0x80 && !isPySpace(r) {
			return false
		}
	}
	return true
}

// Parse parses a PEP 440 version. Surrounding white space and a leading "v" are ignored, letters
// are case-insensitive, numbers may have leading zeros and any size. It returns an error wrapping
// ErrInvalidVersion for anything else.
func Parse(s string) (*Version, error) {
	if !asciiOrSpace(s) {
		return nil, fmt.Errorf("parsing version %q: non-ASCII character: %w", s, ErrInvalidVersion)
	}
	m := reVersion.FindStringSubmatch(s)
	if m == nil {
		return nil, fmt.Errorf("parsing version %q: %w", s, ErrInvalidVersion)
	}
	g := func(name string) string { return m[reVersion.SubexpIndex(name)] }
	v := &Version{epoch: newNum(g("epoch"))}
	for _, r := range strings.Split(g("release"), ".") {
		v.release = append(v.release, newNum(r))
	}
	v.pre = letterVersion(g("pre_l"), g("pre_n"), g("pre") != "")
	postN := g("post_n1")
	if postN == "" {
		postN = g("post_n2")
	}
	v.post = letterVersion(g("post_l"), postN, g("post") != "")
	v.dev = letterVersion(g("dev_l"), g("dev_n"), g("dev") != "")
	if l := g("local"); l != "" {
		for _, p := range reLocalSplit.Split(l, -1) {
			if isDigits(p) {
				v.local = append(v.local, localPart{s: string(newNum(p)), numeric: true})
			} else {
				v.local = append(v.local, localPart{s: strings.ToLower(p)})
			}
		}
	}
	return v, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// letterVersion is packaging's _parse_letter_version.
func letterVersion(letter, number string, present bool) *letterNum {
	if !present {
		return nil
	}
	if letter != "" {
		l := strings.ToLower(letter)
		switch l {
		case "alpha":
			l = "a"
		case "beta":
			l = "b"
		case "c", "pre", "preview":
			l = "rc"
		case "rev", "r":
			l = "post"
		}
		return &letterNum{letter: l, n: newNum(number)}
	}
	if number != "" { // the implicit post release, "1.0-1"
		return &letterNum{letter: "post", n: newNum(number)}
	}
	return nil
}

// String returns the normalized form of the version, as str(Version) does.
func (v *Version) String() string { return v.format(v.releaseString()) }

// format writes the normalized form of the version with release rel.
func (v *Version) format(rel string) string {
	var b strings.Builder
	if v.epoch != "0" {
		b.WriteString(string(v.epoch) + "!")
	}
	b.WriteString(rel)
	if v.pre != nil {
		b.WriteString(v.pre.letter + string(v.pre.n))
	}
	if v.post != nil {
		b.WriteString(".post" + string(v.post.n))
	}
	if v.dev != nil {
		b.WriteString(".dev" + string(v.dev.n))
	}
	if v.local != nil {
		b.WriteString("+" + v.Local())
	}
	return b.String()
}

func (v *Version) releaseString() string {
	parts := make([]string, len(v.release))
	for i, r := range v.release {
		parts[i] = string(r)
	}
	return strings.Join(parts, ".")
}

// Local returns the normalized local label, or "".
func (v *Version) Local() string {
	parts := make([]string, len(v.local))
	for i, p := range v.local {
		parts[i] = p.s
	}
	return strings.Join(parts, ".")
}

// Public returns the version without its local label.
func (v *Version) Public() *Version {
	p := *v
	p.local = nil
	return &p
}

// Base returns the epoch and release only (base_version).
func (v *Version) Base() *Version {
	return &Version{epoch: v.epoch, release: v.release}
}

// IsPrerelease reports whether the version has a pre or dev part.
func (v *Version) IsPrerelease() bool { return v.pre != nil || v.dev != nil }

// IsPostrelease reports whether the version has a post part.
func (v *Version) IsPostrelease() bool { return v.post != nil }

// Compare orders v against o by PEP 440 (packaging's _cmpkey): -1, 0 or +1. Trailing zeros of the
// release do not count ("1.0" == "1.0.0"); dev < pre < final < post; a local label sorts after
// the same version without one.
func (v *Version) Compare(o *Version) int {
	if c := v.epoch.cmp(o.epoch); c != 0 {
		return c
	}
	if c := compareRelease(v.release, o.release); c != 0 {
		return c
	}
	if c := cmpRank(v.preKey(), o.preKey()); c != 0 {
		return c
	}
	if c := cmpRank(optKey(v.post, -1), optKey(o.post, -1)); c != 0 {
		return c
	}
	if c := cmpRank(optKey(v.dev, 1), optKey(o.dev, 1)); c != 0 {
		return c
	}
	return compareLocal(v.local, o.local)
}

func compareRelease(a, b []num) int {
	a, b = trimZeros(a), trimZeros(b)
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := a[i].cmp(b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

func trimZeros(r []num) []num {
	n := len(r)
	for n > 0 && r[n-1] == "0" {
		n--
	}
	return r[:n]
}

// rank is a component of the sort key: -1 (negative infinity), +1 (infinity) or 0 (a value).
type rank struct {
	inf int
	l   letterNum
}

func optKey(p *letterNum, missing int) rank {
	if p == nil {
		return rank{inf: missing}
	}
	return rank{l: *p}
}

func (v *Version) preKey() rank {
	switch {
	case v.pre == nil && v.post == nil && v.dev != nil:
		return rank{inf: -1}
	case v.pre == nil:
		return rank{inf: 1}
	}
	return rank{l: *v.pre}
}

func cmpRank(a, b rank) int {
	if a.inf != 0 || b.inf != 0 {
		return cmp.Compare(a.inf, b.inf)
	}
	if c := strings.Compare(a.l.letter, b.l.letter); c != 0 {
		return c
	}
	return a.l.n.cmp(b.l.n)
}

func compareLocal(a, b []localPart) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		var c int
		switch {
		case x.numeric && y.numeric:
			c = num(x.s).cmp(num(y.s))
		case x.numeric:
			c = 1 // alphanumeric segments sort before numeric ones
		case y.numeric:
			c = -1
		default:
			c = strings.Compare(x.s, y.s)
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// canonical is packaging.utils.canonicalize_version: String with trailing ".0"s of the release
// removed.
func (v *Version) canonical() string {
	rel := v.releaseString()
	for strings.HasSuffix(rel, ".0") {
		rel = strings.TrimSuffix(rel, ".0")
	}
	return v.format(rel)
}
