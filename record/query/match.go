package query

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

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
		return fmt.Errorf("%w: --path %q: %s", ErrBadFilter, clip(s), why)
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
	var sb strings.Builder
	sb.WriteString(`^`)
	lit, inLit := strings.Builder{}, true
	rs := []rune(g)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch c {
		case '*':
			inLit = false
			if i+1 < len(rs) && rs[i+1] == '*' {
				i++
				for i+1 < len(rs) && rs[i+1] == '*' {
					i++
				}
				// "**/" at the start or after "/" also matches no directory.
				if i+1 < len(rs) && rs[i+1] == '/' && (i-2 < 0 || rs[i-2] == '/') {
					i++
					sb.WriteString(`(?:.*/)?`)
				} else {
					sb.WriteString(`.*`)
				}
			} else {
				sb.WriteString(`[^/]*`)
			}
		case '?':
			inLit = false
			sb.WriteString(`[^/]`)
		case '[':
			inLit = false
			j := i + 1
			neg := false
			if j < len(rs) && (rs[j] == '!' || rs[j] == '^') {
				neg = true
				j++
			}
			var cls strings.Builder
			first := true
			for ; j < len(rs) && (rs[j] != ']' || first); j++ {
				first = false
				r := rs[j]
				if r == '\\' {
					j++
					if j >= len(rs) {
						return nil, "", fmt.Errorf("unterminated [ in glob")
					}
					r = rs[j]
				}
				if j+2 < len(rs) && rs[j+1] == '-' && rs[j+2] != ']' {
					hi := rs[j+2]
					if hi < r {
						return nil, "", fmt.Errorf("bad range %c-%c in glob", r, hi)
					}
					cls.WriteString(regexp.QuoteMeta(string(r)) + `-` + regexp.QuoteMeta(string(hi)))
					j += 2
					continue
				}
				if r == '-' {
					cls.WriteString(`\-`)
					continue
				}
				cls.WriteString(regexp.QuoteMeta(string(r)))
			}
			if j >= len(rs) {
				return nil, "", fmt.Errorf("unterminated [ in glob")
			}
			if cls.Len() == 0 {
				return nil, "", fmt.Errorf("empty [] in glob")
			}
			if neg {
				sb.WriteString(`[^/` + cls.String() + `]`)
			} else {
				sb.WriteString(`[` + cls.String() + `]`)
			}
			i = j
		case '\\':
			i++
			if i >= len(rs) {
				return nil, "", fmt.Errorf("trailing \\ in glob")
			}
			sb.WriteString(regexp.QuoteMeta(string(rs[i])))
			if inLit {
				lit.WriteRune(rs[i])
			}
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
		return fmt.Errorf("%w: --domain %q: %s", ErrBadFilter, clip(s), why)
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

// Ecosystems are the package ecosystems (purl types) the filter knows.
var Ecosystems = []string{"npm", "pypi", "cargo", "deb", "oci"}

// RangeEcosystems are the ecosystems whose version ranges can be evaluated.
var RangeEcosystems = []string{"npm", "pypi", "cargo", "deb"}

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

var (
	semverRe = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$`)
	plainRe  = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_:~!-]*$`)
)

// ParsePackage reads a --package value:
//
//	npm:lodash                   any version
//	npm:lodash@4.17.20           an exact version
//	npm:@babel/core@7.24.0       a scoped npm name
//	pkg:npm/lodash@4.17.20       a purl (the version, if any, is exact)
//	npm:lodash@^4.17.0           a range: npm and cargo semver ranges,
//	pypi:requests@>=2,<3         PEP 440 specifiers, Debian relations
//	deb:curl@>= 7.88             (">= 7.88", "<< 8")
func ParsePackage(s string) (*PackageMatch, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: --package %q: %s", ErrBadFilter, clip(s), why)
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
	eco, rest, ok := strings.Cut(s, ":")
	if !ok {
		return nil, bad("want ecosystem:name[@version|@range] (npm:lodash@4.17.20) or a purl (pkg:npm/lodash@4.17.20)")
	}
	eco = strings.ToLower(eco)
	if !contains(Ecosystems, eco) {
		return nil, bad(fmt.Sprintf("unknown ecosystem %q (want one of %s)", eco, strings.Join(Ecosystems, ", ")))
	}
	name, spec := rest, ""
	if i := strings.Index(rest[min(1, len(rest)):], "@"); i >= 0 {
		i += min(1, len(rest))
		name, spec = rest[:i], strings.TrimSpace(rest[i+1:])
		if spec == "" {
			return nil, bad("empty version after @")
		}
	}
	if err := checkName(eco, name); err != nil {
		return nil, bad(err.Error())
	}
	p := &PackageMatch{Ecosystem: eco, Name: resolver.NormalizeName(eco, name)}
	if spec == "" || spec == "*" {
		return p, nil
	}
	if exact, ok := exactVersion(eco, spec); ok {
		p.Version = exact
		return p, nil
	}
	if !contains(RangeEcosystems, eco) {
		return nil, bad(fmt.Sprintf("version ranges are not supported for %s; give an exact version", eco))
	}
	e, rs, err := parseRange(eco, spec)
	if err != nil {
		return nil, bad(fmt.Sprintf("bad %s version range %q: %v", eco, spec, err))
	}
	p.Range, p.eco, p.spec = spec, e, rs
	return p, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func checkName(eco, name string) error {
	if name == "" {
		return fmt.Errorf("empty package name")
	}
	if len(name) > 214 {
		return fmt.Errorf("package name longer than 214 bytes")
	}
	if strings.ContainsAny(name, " \t\"'`$;|&<>(){}") {
		return fmt.Errorf("package name %q has a character names cannot have", name)
	}
	if strings.HasPrefix(name, "@") {
		if eco != "npm" {
			return fmt.Errorf("only npm names have an @scope")
		}
		scope, n, ok := strings.Cut(name[1:], "/")
		if !ok || scope == "" || n == "" || strings.Contains(n, "/") {
			return fmt.Errorf("want a scoped npm name as @scope/name")
		}
	}
	return nil
}

// exactVersion reports whether spec names one exact version, and which.
func exactVersion(eco, spec string) (string, bool) {
	switch eco {
	case "npm", "cargo":
		if semverRe.MatchString(spec) {
			return strings.TrimPrefix(spec, "v"), true
		}
		return "", false
	case "pypi":
		v := spec
		if rest, ok := strings.CutPrefix(v, "==="); ok {
			v = rest
		} else if rest, ok := strings.CutPrefix(v, "=="); ok && !strings.Contains(rest, "*") {
			v = rest
		}
		v = strings.TrimSpace(v)
		if plainRe.MatchString(v) && !strings.ContainsAny(v, ",") {
			return v, true
		}
		return "", false
	case "deb":
		if plainRe.MatchString(spec) {
			return spec, true
		}
		return "", false
	}
	// oci: a tag or a digest.
	if plainRe.MatchString(spec) {
		return spec, true
	}
	return "", false
}

// parsePurl reads a purl --package value; the version, if any, is exact.
// Qualifiers and a subpath are parsed and ignored.
func parsePurl(s string, bad func(string) error) (*PackageMatch, error) {
	u, err := purl.Parse(s)
	if err != nil {
		var se *purl.SyntaxError
		if errors.As(err, &se) {
			return nil, bad(se.Reason)
		}
		return nil, bad(err.Error())
	}
	if !contains(Ecosystems, u.Type) {
		return nil, bad(fmt.Sprintf("unknown purl type %q (want one of %s)", u.Type, strings.Join(Ecosystems, ", ")))
	}
	name := u.Name
	switch u.Type {
	case "npm":
		if u.Namespace != "" {
			scope := u.Namespace
			if !strings.HasPrefix(scope, "@") {
				scope = "@" + scope
			}
			name = scope + "/" + name
		}
	case "oci":
		// An oci purl names the image by its last path segment; the
		// repository is a qualifier.
	default:
		// pkg:deb/debian/curl: the namespace is the vendor, not part of
		// the name.
	}
	if err := checkName(u.Type, name); err != nil {
		return nil, bad(err.Error())
	}
	if u.Version != "" && strings.ContainsAny(u.Version, " \t<>=^~*,|") && u.Type != "deb" {
		return nil, bad("a purl version is exact; use eco:name@range for a range")
	}
	return &PackageMatch{Ecosystem: u.Type, Name: resolver.NormalizeName(u.Type, name), Version: u.Version}, nil
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
