package pep440

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// The version grammars of packaging's Specifier regex, one per operator family.
const (
	specCore = `v?(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*` +
		`(?:[-_\.]?(a|b|c|rc|alpha|beta|pre|preview)[-_\.]?[0-9]*)?` +
		`(?:(?:-[0-9]+)|(?:[-_\.]?(post|rev|r)[-_\.]?[0-9]*))?`
	specDev   = `(?:[-_\.]?dev[-_\.]?[0-9]*)?`
	specLocal = `(?:\+[a-z0-9]+(?:[-_\.][a-z0-9]+)*)?`
)

var (
	ws = `[` + pySpace + `]*`
	// == and !=: dev and local, or a ".*" wildcard.
	reSpecEqual = regexp.MustCompile(`(?i)^` + ws + `(` + specCore + `(?:` + specDev + specLocal + `|\.\*)?)` + ws + `$`)
	// ~=: at least two release components, no local, no wildcard.
	reSpecCompatible = regexp.MustCompile(`(?i)^` + ws + `(v?(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)+` +
		`(?:[-_\.]?(a|b|c|rc|alpha|beta|pre|preview)[-_\.]?[0-9]*)?` +
		`(?:(?:-[0-9]+)|(?:[-_\.]?(post|rev|r)[-_\.]?[0-9]*))?` + specDev + `)` + ws + `$`)
	// <= >= < >: no local, no wildcard.
	reSpecOrdered = regexp.MustCompile(`(?i)^` + ws + `(` + specCore + specDev + `)` + ws + `$`)
	// ===: anything without white space.
	reSpecArbitrary = regexp.MustCompile(`^` + ws + `([^` + pySpace + `]*)` + ws + `$`)
	rePrefix        = regexp.MustCompile(`^([0-9]+)((?:a|b|c|rc)[0-9]+)$`)
)

// A Specifier is one clause of a specifier set, such as ">=1.0" or "==1.4.*".
type Specifier struct {
	Op      string // "~=", "==", "!=", "<=", ">=", "<", ">" or "==="
	Version string // as written, white space stripped

	parsed *Version // Version parsed, unless Op is "===" or Version ends in ".*"
	prefix string   // for "~=": the wildcard the version must also match
	pre    bool     // Prereleases
}

// ParseSpecifier parses one clause, as packaging's Specifier does. Errors wrap
// ErrInvalidSpecifier.
func ParseSpecifier(s string) (Specifier, error) {
	if !asciiOrSpace(s) {
		return Specifier{}, fmt.Errorf("parsing specifier %q: non-ASCII character: %w", s, ErrInvalidSpecifier)
	}
	t := pyStrip(s)
	var op string
	for _, o := range []string{"===", "~=", "==", "!=", "<=", ">=", "<", ">"} {
		if strings.HasPrefix(t, o) {
			op = o
			break
		}
	}
	if op == "" {
		return Specifier{}, fmt.Errorf("parsing specifier %q: no operator: %w", s, ErrInvalidSpecifier)
	}
	var re *regexp.Regexp
	switch op {
	case "===":
		re = reSpecArbitrary
	case "==", "!=":
		re = reSpecEqual
	case "~=":
		re = reSpecCompatible
	default:
		re = reSpecOrdered
	}
	m := re.FindStringSubmatch(t[len(op):])
	if m == nil {
		return Specifier{}, fmt.Errorf("parsing specifier %q: %w", s, ErrInvalidSpecifier)
	}
	sp := Specifier{Op: op, Version: pyStrip(m[1])}
	if op != "===" && !strings.HasSuffix(sp.Version, ".*") {
		sp.parsed = mustParse(sp.Version)
	}
	if op == "~=" {
		sp.prefix = compatiblePrefix(sp.Version)
	}
	sp.pre = sp.namesPrerelease()
	return sp, nil
}

// String returns the clause as packaging prints it: operator then version, as written.
func (s Specifier) String() string { return s.Op + s.Version }

// Prereleases reports whether the clause names a pre-release, which lets the whole set match
// pre-releases (packaging's Specifier.prereleases). Only ==, ===, >=, <= and ~= count.
func (s Specifier) Prereleases() bool { return s.pre }

func (s Specifier) namesPrerelease() bool {
	switch s.Op {
	case "==", ">=", "<=", "~=", "===":
		v := s.Version
		if s.Op == "==" {
			v = strings.TrimSuffix(v, ".*")
		}
		p, err := Parse(v)
		return err == nil && p.IsPrerelease()
	}
	return false
}

// contains is Specifier.contains with an explicit prereleases flag.
func (s Specifier) contains(v *Version, prereleases bool) bool {
	if v.IsPrerelease() && !prereleases {
		return false
	}
	return s.compare(v)
}

// compare applies the operator, as packaging's _compare_* methods do.
func (s Specifier) compare(v *Version) bool {
	switch s.Op {
	case "~=":
		return s.compatible(v)
	case "==":
		return s.equal(v)
	case "!=":
		return !s.equal(v)
	case "<=":
		return v.Public().Compare(s.parsed) <= 0
	case ">=":
		return v.Public().Compare(s.parsed) >= 0
	case "<":
		spec := s.parsed
		if v.Compare(spec) >= 0 {
			return false
		}
		if !spec.IsPrerelease() && v.IsPrerelease() && v.Base().Compare(spec.Base()) == 0 {
			return false
		}
		return true
	case ">":
		spec := s.parsed
		if v.Compare(spec) <= 0 {
			return false
		}
		if !spec.IsPostrelease() && v.IsPostrelease() && v.Base().Compare(spec.Base()) == 0 {
			return false
		}
		if v.local != nil && v.Base().Compare(spec.Base()) == 0 {
			return false
		}
		return true
	case "===":
		return strings.ToLower(v.String()) == strings.ToLower(s.Version)
	}
	return false
}

// mustParse parses a version that the specifier grammar has already accepted; that grammar is
// a subset of the version grammar, so it cannot fail.
func mustParse(s string) *Version {
	v, err := Parse(s)
	if err != nil {
		panic(fmt.Sprintf("pep440: specifier version %q does not parse: %v", s, err))
	}
	return v
}

func (s Specifier) compatible(v *Version) bool {
	return v.Public().Compare(s.parsed) >= 0 && equal(v, s.prefix, nil)
}

// compatiblePrefix is the wildcard of _compare_compatible: the version's release without its
// last component, then ".*" ("1.4.2" gives "1.4.*").
func compatiblePrefix(version string) string {
	var prefix []string
	for _, seg := range versionSplit(version) {
		if strings.HasPrefix(seg, "dev") || strings.HasPrefix(seg, "a") || strings.HasPrefix(seg, "b") || strings.HasPrefix(seg, "rc") || strings.HasPrefix(seg, "post") {
			break
		}
		prefix = append(prefix, seg)
	}
	if len(prefix) > 0 {
		prefix = prefix[:len(prefix)-1]
	}
	return strings.Join(prefix, ".") + ".*"
}

func (s Specifier) equal(v *Version) bool { return equal(v, s.Version, s.parsed) }

// equal is _compare_equal; sv is spec parsed, or nil for a wildcard.
func equal(v *Version, spec string, sv *Version) bool {
	if prefix, ok := strings.CutSuffix(spec, ".*"); ok {
		splitSpec := versionSplit(prefix)
		splitV := versionSplit(v.Public().String())
		if len(splitV) > len(splitSpec) {
			splitV = splitV[:len(splitSpec)]
		}
		a, b := padVersion(splitSpec, splitV)
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	if sv == nil {
		sv = mustParse(spec)
	}
	if sv.local == nil {
		v = v.Public()
	}
	return v.Compare(sv) == 0
}

// versionSplit is packaging's _version_split.
func versionSplit(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ".") {
		if m := rePrefix.FindStringSubmatch(item); m != nil {
			out = append(out, m[1], m[2])
		} else {
			out = append(out, item)
		}
	}
	return out
}

// padVersion is packaging's _pad_version.
func padVersion(left, right []string) ([]string, []string) {
	ld, rd := leadingDigits(left), leadingDigits(right)
	l := append(append(append([]string{}, left[:ld]...), zeros(rd-ld)...), left[ld:]...)
	r := append(append(append([]string{}, right[:rd]...), zeros(ld-rd)...), right[rd:]...)
	return l, r
}

func leadingDigits(xs []string) int {
	n := 0
	for n < len(xs) && isDigits(xs[n]) {
		n++
	}
	return n
}

func zeros(n int) []string {
	var z []string
	for ; n > 0; n-- {
		z = append(z, "0")
	}
	return z
}

// A Specifiers is a parsed specifier set: clauses that must all hold. The empty set matches
// every final release.
type Specifiers struct {
	specs []Specifier
}

// ParseSpecifiers parses a comma-separated specifier set, as packaging's SpecifierSet does:
// empty clauses are ignored, and a clause equal to an earlier one (same operator, same
// canonical version) is dropped. Every clause must be a PEP 440 specifier (there is no
// LegacySpecifier fallback). Errors wrap ErrInvalidSpecifier.
func ParseSpecifiers(s string) (*Specifiers, error) {
	set := &Specifiers{}
	seen := map[[2]string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = pyStrip(part)
		if part == "" {
			continue
		}
		sp, err := ParseSpecifier(part)
		if err != nil {
			return nil, fmt.Errorf("parsing specifier set %q: %w", s, err)
		}
		canon := sp.Version
		if v, err := Parse(sp.Version); err == nil {
			canon = v.canonical()
		}
		key := [2]string{sp.Op, canon}
		if seen[key] {
			continue
		}
		seen[key] = true
		set.specs = append(set.specs, sp)
	}
	return set, nil
}

// Specifiers returns the clauses in the order written.
func (s *Specifiers) Specifiers() []Specifier { return s.specs }

// String returns the clauses sorted and joined with ",", as str(SpecifierSet) does.
func (s *Specifiers) String() string {
	parts := make([]string, len(s.specs))
	for i, sp := range s.specs {
		parts[i] = sp.String()
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Prereleases reports whether some clause names a pre-release.
func (s *Specifiers) Prereleases() bool {
	for _, sp := range s.specs {
		if sp.Prereleases() {
			return true
		}
	}
	return false
}

// Contains reports whether v satisfies every clause, as SpecifierSet.contains does:
// pre-releases (and dev releases) are excluded unless a clause names a pre-release.
func (s *Specifiers) Contains(v *Version) bool {
	pre := s.Prereleases()
	if v.IsPrerelease() && !pre {
		return false
	}
	for _, sp := range s.specs {
		if !sp.contains(v, pre) {
			return false
		}
	}
	return true
}

// Filter returns the indexes of the candidates that pip would consider, as
// SpecifierSet.filter(candidates) does (pip calls it with prereleases=None): those that satisfy
// every clause, pre-releases excluded unless a clause names one. Only when the set is empty and
// no final release exists are the pre-releases returned instead.
func (s *Specifiers) Filter(candidates []*Version) []int {
	var out, pre []int
	allowPre := s.Prereleases()
	for i, v := range candidates {
		if len(s.specs) == 0 {
			if v.IsPrerelease() {
				if len(out) == 0 {
					pre = append(pre, i)
				}
				continue
			}
			out = append(out, i)
			continue
		}
		ok := true
		for _, sp := range s.specs {
			if !sp.contains(v, allowPre) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, i)
		}
	}
	if len(s.specs) == 0 && len(out) == 0 {
		return pre
	}
	return out
}

// Best returns the index of the highest candidate that Filter keeps (the first of equal ones),
// or -1.
func (s *Specifiers) Best(candidates []*Version) int {
	best := -1
	for _, i := range s.Filter(candidates) {
		if best < 0 || candidates[i].Compare(candidates[best]) > 0 {
			best = i
		}
	}
	return best
}
