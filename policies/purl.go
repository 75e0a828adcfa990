package policy

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/purl"
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
	// normalized as the ecosystem compares names (see resolver.NormalizeName).
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
		s += "@" + versionEscape.Replace(p.Version)
	}
	return s
}

// versionEscape encodes what would end a version or be read as another
// part of a purl; the rest of a range (spaces, <, |) stays readable.
var versionEscape = strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23", "/", "%2F", "@", "%40")

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
	n := resolver.NormalizeName(ecosystem, name)
	if !p.IsGlob() {
		return n == p.Name
	}
	ok, err := path.Match(p.Name, n)
	return err == nil && ok
}

// ParsePurl parses a purl-style package pattern. It accepts exactly:
//
//	pkg:TYPE/NAME[@VERSION]
//	pkg:TYPE/NAMESPACE/NAME[@VERSION]
//
// with TYPE one of Ecosystems. The purl is split by purl.Parse, so name,
// namespace and version are percent-decoded (pkg:npm/%40scope/name; an
// unencoded @scope is accepted too). Qualifiers (?…) and subpaths (#…) are
// rejected, because a policy could not honour them. Errors say which part
// is wrong.
func ParsePurl(s string) (Purl, error) {
	u, err := purl.Parse(s)
	if err != nil {
		return Purl{}, err
	}
	bad := func(format string, a ...any) (Purl, error) {
		return Purl{}, fmt.Errorf("purl %q: "+format, append([]any{s}, a...)...)
	}
	if strings.ContainsAny(s, "?#") {
		return bad("qualifiers (?) and subpaths (#) are not supported")
	}
	if !knownEcosystem(u.Type) {
		return bad("unknown type %q (want one of %s)", u.Type, strings.Join(Ecosystems, ", "))
	}
	if strings.ContainsAny(u.Name, " \t\r\n") {
		return bad("name %q contains a slash or space", u.Name)
	}
	if strings.ContainsAny(u.Namespace, " \t\r\n") {
		return bad("bad namespace %q", u.Namespace)
	}
	full := u.Name
	if u.Namespace != "" {
		full = u.Namespace + "/" + u.Name
	}
	switch u.Type {
	case "npm":
		if u.Namespace != "" && !strings.HasPrefix(u.Namespace, "@") || u.Namespace == "@" {
			return bad("an npm namespace is a scope such as %%40scope")
		}
	case "pypi", "cargo", "deb":
		if u.Namespace != "" {
			return bad("%s packages have no namespace", u.Type)
		}
	}
	p := Purl{Type: u.Type, Name: resolver.NormalizeName(u.Type, full), Version: u.Version}
	if p.IsGlob() {
		if _, err := path.Match(p.Name, ""); err != nil {
			return bad("bad name pattern: %w", err)
		}
	}
	return p, nil
}
