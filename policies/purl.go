package policies

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/purl"
)

// Ecosystems are the purl types a policy knows, in the resolver registry's
// order (resolver.Names); it is derived from the registry, not a second
// list. Callers must not modify it.
var Ecosystems = resolver.Names()

// knownEcosystem reports whether e is a purl type a policy knows: one of
// Ecosystems.
func knownEcosystem(e string) bool { return resolver.Known(e) }

// hasRanges reports whether versions of ecosystem e are compared through
// package resolver (npm, pypi, cargo, deb); oci versions are tags, matched
// exactly.
func hasRanges(e string) bool {
	eco, err := resolver.Lookup(e)
	return err == nil && eco.HasRanges()
}

// Purl is a parsed purl-style package pattern:
// pkg:TYPE/[NAMESPACE/]NAME[@VERSION]. The name (including any namespace)
// may be a glob in path.Match syntax, and the version is kept as written:
// a policy uses it as a range in the ecosystem's own syntax.
type Purl struct {
	// Type is the ecosystem: one of resolver.Names().
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
// with TYPE one of resolver.Names(). The purl is split by purl.Parse, so name,
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
	eco, err := resolver.Lookup(u.Type)
	if err != nil {
		return bad("unknown type %q (want one of %s)", u.Type, strings.Join(resolver.Names(), ", "))
	}
	if strings.ContainsAny(u.Name, " \t\r\n") {
		return bad("name %q contains a slash or space", u.Name)
	}
	if strings.ContainsAny(u.Namespace, " \t\r\n") {
		return bad("bad namespace %q", u.Namespace)
	}
	switch eco.Namespace() {
	case resolver.Scope:
		if u.Namespace != "" && !strings.HasPrefix(u.Namespace, "@") || u.Namespace == "@" {
			return bad("an npm namespace is a scope such as %%40scope")
		}
	case resolver.Vendor:
		// A deb vendor (pkg:deb/debian/curl) is not part of the name,
		// and a pattern of names cannot honour it.
		if u.Namespace != "" {
			return bad("%s packages have no namespace", u.Type)
		}
	}
	// The namespace of an npm scope or an OCI path is part of the name
	// (@scope/name, library/alpine).
	_, full, err := resolver.FromPurl(u)
	if err != nil {
		return bad("%w", err)
	}
	p := Purl{Type: u.Type, Name: eco.NormalizeName(full), Version: u.Version}
	if p.IsGlob() {
		if _, err := path.Match(p.Name, ""); err != nil {
			return bad("bad name pattern: %w", err)
		}
	}
	return p, nil
}
