package query

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/purl"
)

// MaxPathLen is the longest --path pattern accepted.
const MaxPathLen = 4096

// PathMatch matches file paths: either a prefix (the path itself and
// everything beneath it, so "/etc/ssh" matches "/etc/ssh/sshd_config" but
// not the sibling "/etc/sshd") or a glob where "*" and "?" do not cross
// "/", "**" does, and "[...]" is a character class ("[!...]" negated).
type PathMatch struct {
	// Pattern is the prefix (cleaned) or the glob, as matched.
	Pattern string
	// Glob is set when Pattern is a glob.
	Glob bool

	lit string // the literal start of a glob
	re  *regexp.Regexp
}

// Range is a half-open interval of strings [Lo, Hi); an empty Hi means no
// upper bound. Lo == Hi with Exact set means the single value Lo.
type Range struct {
	Lo, Hi string
	Exact  bool
}

// ParsePath reads a --path value: a glob when it has one of * ? [ or \,
// otherwise a prefix.
func ParsePath(s string) (*PathMatch, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: --path %q: %s", ErrBadFilter, event.Clip(s, 80), why)
	}
	if s == "" {
		return nil, bad("empty")
	}
	if len(s) > MaxPathLen {
		return nil, bad(fmt.Sprintf("longer than %d bytes", MaxPathLen))
	}
	if strings.IndexByte(s, 0) >= 0 {
		return nil, bad("contains a NUL byte")
	}
	if !strings.ContainsAny(s, `*?[\`) {
		return &PathMatch{Pattern: path.Clean(s)}, nil
	}
	re, lit, err := globRegexp(s)
	if err != nil {
		return nil, bad(err.Error())
	}
	return &PathMatch{Pattern: s, Glob: true, lit: lit, re: re}, nil
}

// Match reports whether p matches the file path name.
func (p *PathMatch) Match(name string) bool {
	if p.Glob {
		return strings.HasPrefix(name, p.lit) && p.re.MatchString(name)
	}
	if p.Pattern == "/" {
		return strings.HasPrefix(name, "/")
	}
	return name == p.Pattern || strings.HasPrefix(name, p.Pattern) && name[len(p.Pattern)] == '/'
}

// Ranges returns string ranges that together hold every path p matches, so
// that an ordered index can find the candidates; Match then decides.
func (p *PathMatch) Ranges() []Range {
	if p.Glob {
		return []Range{prefixRange(p.lit)}
	}
	if p.Pattern == "/" {
		return []Range{prefixRange("/")}
	}
	return []Range{{Lo: p.Pattern, Hi: p.Pattern, Exact: true}, prefixRange(p.Pattern + "/")}
}

// prefixRange is the range of all strings starting with s.
func prefixRange(s string) Range {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return Range{Lo: s, Hi: string(b[:i+1])}
		}
	}
	return Range{Lo: s}
}

// globRegexp translates a glob into an anchored regular expression (RE2,
// so matching is linear in the input whatever the pattern) and returns its
// literal start.
func globRegexp(g string) (*regexp.Regexp, string, error) {
	var sb, lit strings.Builder
	sb.WriteString(`^`)
	inLit := true
	rs := []rune(g)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch c {
		case '*':
			inLit = false
			i = globStar(&sb, rs, i)
		case '?':
			inLit = false
			sb.WriteString(`[^/]`)
		case '[':
			inLit = false
			cls, end, err := globClass(rs, i)
			if err != nil {
				return nil, "", err
			}
			sb.WriteString(cls)
			i = end
		case '\\':
			i++
			if i >= len(rs) {
				return nil, "", fmt.Errorf("trailing \\ in glob")
			}
			c = rs[i]
			fallthrough
		default:
			sb.WriteString(regexp.QuoteMeta(string(c)))
			if inLit {
				lit.WriteRune(c)
			}
		}
	}
	sb.WriteString(`$`)
	re, err := regexp.Compile(sb.String())
	if err != nil {
		return nil, "", fmt.Errorf("compiling glob: %v", err)
	}
	return re, lit.String(), nil
}

// globStar writes the expression for the * at rs[i] ("*" does not cross
// "/", a run of two or more does) and returns the index of the last rune
// it used.
func globStar(sb *strings.Builder, rs []rune, i int) int {
	if i+1 >= len(rs) || rs[i+1] != '*' {
		sb.WriteString(`[^/]*`)
		return i
	}
	i++
	for i+1 < len(rs) && rs[i+1] == '*' {
		i++
	}
	// "**/" at the start or after "/" also matches no directory.
	if i+1 < len(rs) && rs[i+1] == '/' && (i-2 < 0 || rs[i-2] == '/') {
		sb.WriteString(`(?:.*/)?`)
		return i + 1
	}
	sb.WriteString(`.*`)
	return i
}

// globClass translates the character class that starts at rs[i] ("[...]",
// "[!...]" or "[^...]" negated, which never match "/") and returns the
// expression and the index of its closing "]".
func globClass(rs []rune, i int) (string, int, error) {
	j := i + 1
	neg := false
	if j < len(rs) && (rs[j] == '!' || rs[j] == '^') {
		neg = true
		j++
	}
	var cls strings.Builder
	for first := true; j < len(rs) && (rs[j] != ']' || first); j++ {
		first = false
		r := rs[j]
		if r == '\\' {
			j++
			if j >= len(rs) {
				return "", 0, fmt.Errorf("unterminated [ in glob")
			}
			r = rs[j]
		}
		switch {
		case j+2 < len(rs) && rs[j+1] == '-' && rs[j+2] != ']':
			hi := rs[j+2]
			if hi < r {
				return "", 0, fmt.Errorf("bad range %c-%c in glob", r, hi)
			}
			cls.WriteString(regexp.QuoteMeta(string(r)) + `-` + regexp.QuoteMeta(string(hi)))
			j += 2
		case r == '-':
			cls.WriteString(`\-`)
		default:
			cls.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	if j >= len(rs) {
		return "", 0, fmt.Errorf("unterminated [ in glob")
	}
	if cls.Len() == 0 {
		return "", 0, fmt.Errorf("empty [] in glob")
	}
	if neg {
		return `[^/` + cls.String() + `]`, j, nil
	}
	return `[` + cls.String() + `]`, j, nil
}

// DomainMatch matches domain names: exactly, or with Suffix every
// sub-domain of Name ("*.example.com" matches "a.example.com" and
// "a.b.example.com", but neither "example.com" nor "badexample.com").
type DomainMatch struct {
	// Name is lowercase, without a trailing dot or the "*." of a suffix.
	Name   string
	Suffix bool
}

// ParseDomain reads a --domain value: "example.com" or "*.example.com".
func ParseDomain(s string) (*DomainMatch, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: --domain %q: %s", ErrBadFilter, event.Clip(s, 80), why)
	}
	d := &DomainMatch{}
	name := strings.TrimSuffix(strings.ToLower(s), ".")
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		d.Suffix, name = true, rest
	}
	if name == "" || name == "*" {
		return nil, bad("want a domain name (example.com) or a suffix (*.example.com)")
	}
	if len(name) > 253 {
		return nil, bad("longer than 253 bytes")
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 {
			return nil, bad("empty or over-long label")
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				if r == '*' {
					return nil, bad(`"*" is only allowed as a leading "*." (a suffix)`)
				}
				return nil, bad(fmt.Sprintf("character %q is not allowed in a domain name", r))
			}
		}
	}
	d.Name = name
	return d, nil
}

// NormalizeDomain lowercases a recorded domain and drops a trailing dot.
func NormalizeDomain(s string) string {
	return strings.TrimSuffix(strings.ToLower(s), ".")
}

// ReverseDomain returns the labels of a normalized domain in reverse order
// ("www.example.com" becomes "com.example.www"), so that every sub-domain
// of a name shares a string prefix and an ordered index can find them.
func ReverseDomain(s string) string {
	ls := strings.Split(s, ".")
	for i, j := 0, len(ls)-1; i < j; i, j = i+1, j-1 {
		ls[i], ls[j] = ls[j], ls[i]
	}
	return strings.Join(ls, ".")
}

// Match reports whether d matches a recorded domain name.
func (d *DomainMatch) Match(domain string) bool {
	domain = NormalizeDomain(domain)
	if d.Suffix {
		return strings.HasSuffix(domain, "."+d.Name)
	}
	return domain == d.Name
}

// Range returns the range of reversed domains (ReverseDomain) that d
// matches.
func (d *DomainMatch) Range() Range {
	r := ReverseDomain(d.Name)
	if d.Suffix {
		return prefixRange(r + ".")
	}
	return Range{Lo: r, Hi: r, Exact: true}
}

// PackageMatch matches pkg events by ecosystem, name and version.
type PackageMatch struct {
	Ecosystem string
	// Name is normalized with resolver.NormalizeName.
	Name string
	// Version is an exact version; empty with an empty Range means any.
	Version string
	// Range is a version range in the ecosystem's own syntax.
	Range string

	eco  *resolver.Ecosystem
	spec resolver.Spec
}

// ParsePackage reads a --package value:
//
//	npm:lodash                   any version
//	npm:lodash@4.17.20           an exact version
//	npm:@babel/core@7.24.0       a scoped npm name
//	pkg:npm/lodash@4.17.20       a purl (the version, if any, is exact)
//	npm:lodash@^4.17.0           a range: npm and cargo semver ranges,
//	pypi:requests@>=2,<3         PEP 440 specifiers, Debian relations
//	deb:curl@>= 7.88             (">= 7.88", "<< 8")
//	pypi:requests==2.31.0        a PyPI requirement as pip takes it: the
//	pypi:requests>=2,<3          same as pypi:requests@==2.31.0 and
//	                             pypi:requests@>=2,<3
//	pypi:requests[socks]         a PyPI name's extras are dropped
//
// The ecosystem:name[@spec] form is read by resolver.ParseRef; its spec
// is exact when it is a version alone in the ecosystem's exact-version
// syntax (resolver.Ecosystem.ExactVersion), and a range otherwise. A
// PyPI spec that names its operator is a range even when it names one
// version, so that ==2.31 matches 2.31.0 as PEP 440 says (a bare 2.31 is
// compared as written). A name that holds a version operator (<, > or
// =) is an error that names the expected form, never a name that matches
// nothing.
func ParsePackage(s string) (*PackageMatch, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: --package %q: %s", ErrBadFilter, event.Clip(s, 80), why)
	}
	if len(s) > 512 {
		return nil, bad("longer than 512 bytes")
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return nil, bad("contains a control character")
	}
	if strings.HasPrefix(s, "pkg:") {
		return parsePurl(s, bad)
	}
	r, err := resolver.ParseRef(pipRequirement(s))
	if errors.Is(err, resolver.ErrNotRef) {
		return nil, bad("want ecosystem:name[@version|@range] (npm:lodash@4.17.20) or a purl (pkg:npm/lodash@4.17.20)")
	}
	if err != nil {
		return nil, bad(err.Error())
	}
	e := r.Ecosystem
	if e.Name() == resolver.PyPI {
		r.Name = dropExtras(r.Name)
	}
	if strings.ContainsAny(r.Name, nameOperators) {
		return nil, bad(fmt.Sprintf("package name %q holds a version operator: want %s:NAME@VERSION or %s:NAME@RANGE, such as %s",
			r.Name, e.Name(), e.Name(), refExamples))
	}
	p := &PackageMatch{Ecosystem: e.Name(), Name: e.NormalizeName(r.Name)}
	if r.Spec == "" || r.Spec == "*" {
		return p, nil
	}
	if exact, ok := e.ExactVersion(r.Spec); ok && (!e.HasRanges() || !e.MayBeRange(r.Spec)) {
		p.Version = exact
		return p, nil
	}
	if !e.HasRanges() {
		return nil, bad(fmt.Sprintf("version ranges are not supported for %s; give an exact version", e.Name()))
	}
	spec, err := e.ParseSpec(r.Spec)
	if err != nil {
		return nil, bad(fmt.Sprintf("bad %s version range %q (want a version, or a range in the ecosystem's own syntax: %s): %v",
			e.Name(), r.Spec, refExamples, err))
	}
	p.Range, p.eco, p.spec = r.Spec, e, spec
	return p, nil
}

// nameOperators are the characters of a version operator that no
// ecosystem's package names hold: a name with one is a version spec
// written without its @.
const nameOperators = "<>="

// pep440Operators are the characters a PEP 440 version operator (==,
// !=, <=, >=, <, >, ~=, ===) begins with. A PyPI name (PEP 508: letters,
// digits, '.', '_' and '-') holds none of them.
const pep440Operators = "<>=!~"

// pipRequirement rewrites a PyPI requirement written as pip takes it,
// pypi:NAME followed by PEP 440 specifiers (pypi:requests==2.31.0,
// pypi:requests >=2,<3), as pypi:NAME@SPECIFIERS, the form
// resolver.ParseRef reads. Any other s, and one that already holds an @,
// is returned as it is.
func pipRequirement(s string) string {
	eco, rest, ok := strings.Cut(s, ":")
	if !ok || !strings.EqualFold(eco, resolver.PyPI) || strings.Contains(rest, "@") {
		return s
	}
	i := strings.IndexAny(rest, pep440Operators)
	if i < 0 {
		return s
	}
	name := strings.TrimSpace(rest[:i])
	if name == "" {
		return s
	}
	return eco + ":" + name + "@" + rest[i:]
}

// dropExtras returns a PyPI name without its extras (requests[socks] is
// requests): they select optional dependencies, not another package.
func dropExtras(name string) string {
	if i := strings.IndexByte(name, '['); i > 0 && strings.HasSuffix(name, "]") {
		return name[:i]
	}
	return name
}

// refExamples are --package ranges, for the errors that say what was
// expected.
const refExamples = "npm:lodash@<4.17.21, pypi:requests@>=2,<3, pypi:requests==2.31.0"

// parsePurl reads a purl --package value; the version, if any, is exact.
// Qualifiers and a subpath are parsed and ignored. The name is
// resolver.FromPurl's: an npm scope is part of it, and so is an oci
// namespace (pkg:oci/library/alpine is the repository library/alpine, as
// the mirror records it); a deb namespace (pkg:deb/debian/curl) is the
// vendor, and a namespace is an error where names have none.
func parsePurl(s string, bad func(string) error) (*PackageMatch, error) {
	u, err := purl.Parse(s)
	if err != nil {
		var se *purl.SyntaxError
		if errors.As(err, &se) {
			return nil, bad(se.Reason)
		}
		return nil, bad(err.Error())
	}
	e, name, err := resolver.FromPurl(u)
	if errors.Is(err, resolver.ErrUnknownEcosystem) {
		return nil, bad(fmt.Sprintf("unknown purl type %q (want one of %s)", u.Type, strings.Join(resolver.Names(), ", ")))
	}
	if err != nil {
		return nil, bad(err.Error())
	}
	if err := e.CheckName(name); err != nil {
		return nil, bad(err.Error())
	}
	if strings.ContainsAny(name, nameOperators) {
		return nil, bad(fmt.Sprintf("package name %q holds a version operator: a purl's version follows an @ (pkg:%s/NAME@VERSION)", name, u.Type))
	}
	if u.Version != "" && e.MayBeRange(u.Version) {
		return nil, bad("a purl version is exact; use eco:name@range for a range")
	}
	return &PackageMatch{Ecosystem: e.Name(), Name: e.NormalizeName(name), Version: u.Version}, nil
}

// MatchVersion reports whether a recorded (resolved) version satisfies p.
// A version the ecosystem cannot parse does not satisfy a range.
func (p *PackageMatch) MatchVersion(v string) bool {
	switch {
	case p.Range != "":
		return p.matchRange(v)
	case p.Version != "":
		return v == p.Version
	}
	return true
}

// String returns p as ecosystem:name[@version].
func (p *PackageMatch) String() string {
	s := p.Ecosystem + ":" + p.Name
	switch {
	case p.Range != "":
		s += "@" + p.Range
	case p.Version != "":
		s += "@" + p.Version
	}
	return s
}
