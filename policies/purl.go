package policy

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
)

// Ecosystems are the purl types a policy knows, in a stable order. npm,
// pypi, cargo and deb have version ranges (through package resolver); oci
// versions are tags, matched exactly.
var Ecosystems = []string{"npm", "pypi", "cargo", "deb", "oci"}

func knownEcosystem(e string) bool {
	for _, k := range Ecosystems {
		if e == k {
			return true
		}
	}
	return false
}

// hasRanges reports whether versions of ecosystem e are compared through
// package resolver.
func hasRanges(e string) bool { return e != "oci" }

// Purl is a parsed purl-style package pattern:
// pkg:TYPE/[NAMESPACE/]NAME[@VERSION]. The name (including any namespace)
// may be a glob in path.Match syntax, and the version is kept as written:
// a policy uses it as a range in the ecosystem's own syntax.
type Purl struct {
	// Type is the ecosystem: npm, pypi, cargo, deb or oci.
	Type string
	// Name is the full package name as the ecosystem writes it, with the
	// namespace: "@scope/name" for npm, "library/alpine" for oci. It is
	// normalized as the ecosystem compares names (see NormalizeName).
	Name string
	// Version is the text after the @, or empty.
	Version string
}

// String returns the purl form, with the name percent-encoded (an npm
// scope's @ as %40).
func (p Purl) String() string {
	segs := strings.Split(p.Name, "/")
	for i, s := range segs {
		segs[i] = globUnescape.Replace(strings.ReplaceAll(url.PathEscape(s), "@", "%40"))
	}
	s := "pkg:" + p.Type + "/" + strings.Join(segs, "/")
	if p.Version != "" {
		s += "@" + p.Version
	}
	return s
}

// globUnescape keeps a pattern's * and [] readable in String; ? stays
// escaped, as an unescaped ? would start purl qualifiers.
var globUnescape = strings.NewReplacer("%2A", "*", "%5B", "[", "%5D", "]")

// IsGlob reports whether the name is a pattern rather than one name.
func (p Purl) IsGlob() bool { return strings.ContainsAny(p.Name, `*?[\`) }

// MatchName reports whether the package name (in any spelling the
// ecosystem treats as equal) matches p's name or pattern.
func (p Purl) MatchName(ecosystem, name string) bool {
	if ecosystem != p.Type {
		return false
	}
	n := NormalizeName(ecosystem, name)
	if !p.IsGlob() {
		return n == p.Name
	}
	ok, err := path.Match(p.Name, n)
	return err == nil && ok
}

var pypiSeparators = regexp.MustCompile(`[-_.]+`)

// NormalizeName returns name as ecosystem compares names: PEP 503 for pypi
// (lower case, runs of -, _ and . become -), lower case with - for _ for
// cargo (crates.io treats them as the same crate), lower case for deb and
// oci, and as written for npm (whose names are case-sensitive).
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

// ParsePurl parses a purl-style package pattern. It accepts exactly:
//
//	pkg:TYPE/NAME[@VERSION]
//	pkg:TYPE/NAMESPACE/NAME[@VERSION]
//
// with TYPE one of Ecosystems. Name and namespace are percent-decoded
// (pkg:npm/%40scope/name; an unencoded @scope is accepted too). Qualifiers
// (?…) and subpaths (#…) are rejected, because a policy could not honour
// them. Errors say which part is wrong.
func ParsePurl(s string) (Purl, error) {
	var p Purl
	rest, ok := strings.CutPrefix(s, "pkg:")
	if !ok {
		return p, fmt.Errorf("purl %q: must start with pkg:", s)
	}
	if strings.ContainsAny(rest, "?#") {
		return p, fmt.Errorf("purl %q: qualifiers (?) and subpaths (#) are not supported", s)
	}
	rest = strings.TrimPrefix(rest, "//") // pkg://npm/x is tolerated by the spec
	typ, rest, ok := strings.Cut(rest, "/")
	if !ok || typ == "" {
		return p, fmt.Errorf("purl %q: want pkg:TYPE/NAME", s)
	}
	p.Type = strings.ToLower(typ)
	if !knownEcosystem(p.Type) {
		return p, fmt.Errorf("purl %q: unknown type %q (want one of %s)", s, typ, strings.Join(Ecosystems, ", "))
	}
	// The version starts at the first @ of the last path segment, unless
	// that @ begins the segment (an unencoded npm scope with no name after
	// it is caught below).
	var ns, nameVer string
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		ns, nameVer = rest[:i], rest[i+1:]
	} else {
		nameVer = rest
	}
	name, version, hasVersion := strings.Cut(nameVer, "@")
	if hasVersion {
		if version == "" {
			return p, fmt.Errorf("purl %q: empty version after @", s)
		}
		p.Version = version
	}
	dn, err := url.PathUnescape(name)
	if err != nil {
		return p, fmt.Errorf("purl %q: name: %w", s, err)
	}
	if dn == "" {
		return p, fmt.Errorf("purl %q: empty name", s)
	}
	if strings.ContainsAny(dn, "/ \t\r\n") {
		return p, fmt.Errorf("purl %q: name %q contains a slash or space", s, dn)
	}
	full := dn
	if ns != "" {
		dns, err := url.PathUnescape(ns)
		if err != nil {
			return p, fmt.Errorf("purl %q: namespace: %w", s, err)
		}
		if dns == "" || strings.ContainsAny(dns, " \t\r\n") || strings.Contains(dns, "//") {
			return p, fmt.Errorf("purl %q: bad namespace %q", s, dns)
		}
		full = dns + "/" + dn
	}
	switch p.Type {
	case "npm":
		if strings.Count(full, "/") > 1 || (strings.Contains(full, "/") && !strings.HasPrefix(full, "@")) {
			return p, fmt.Errorf("purl %q: an npm namespace is a scope such as %%40scope", s)
		}
		if full == "@" || strings.HasSuffix(full, "/") {
			return p, fmt.Errorf("purl %q: empty npm name", s)
		}
	case "pypi", "cargo", "deb":
		if ns != "" {
			return p, fmt.Errorf("purl %q: %s packages have no namespace", s, p.Type)
		}
	}
	p.Name = NormalizeName(p.Type, full)
	if p.IsGlob() {
		if _, err := path.Match(p.Name, ""); err != nil {
			return p, fmt.Errorf("purl %q: bad name pattern: %w", s, err)
		}
	}
	return p, nil
}
