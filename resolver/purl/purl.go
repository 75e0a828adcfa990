// Package purl parses package URLs (purls), the
// pkg:TYPE/NAMESPACE/NAME@VERSION?QUALIFIERS#SUBPATH names of the purl
// specification (github.com/package-url/purl-spec).
//
// Parse splits a purl into its parts and percent-decodes each; it knows no
// ecosystem beyond npm's scope. What a caller accepts on top (which types,
// whether the version is exact or a range, whether names may be globs) is
// the caller's policy. Input is untrusted: Parse returns a *SyntaxError
// (wrapping ErrSyntax) for anything it cannot split, and never panics.
package purl

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/resolver/ecosystem"
)

// ErrSyntax is wrapped by every error Parse returns.
var ErrSyntax = errors.New("purl: bad syntax")

// A SyntaxError says why a string is not a purl. Its message is
// `purl "<input>": <reason>`.
type SyntaxError struct {
	// Purl is the input.
	Purl string
	// Reason says which part is wrong, for example "empty name".
	Reason string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("purl %q: %s", e.Purl, e.Reason) }

// Unwrap returns ErrSyntax.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// Purl is a parsed package URL, every part percent-decoded.
type Purl struct {
	// Type is the package type, lower case: "npm", "pypi", "deb".
	Type string
	// Namespace is the namespace segments joined with "/", or empty: the
	// scope of an npm package ("@babel"), the vendor of a deb package
	// ("debian"), the path of an OCI image ("library").
	Namespace string
	// Name is the package name.
	Name string
	// Version is the text after the @, or empty.
	Version string
	// Qualifiers are the key=value pairs after the ?, keys lower case;
	// nil when there are none.
	Qualifiers map[string]string
	// Subpath is the path after the #, without empty, "." or ".."
	// segments.
	Subpath string
}

// Parse parses s, a purl:
//
//	pkg:TYPE/[NAMESPACE/]NAME[@VERSION][?KEY=VALUE&...][#SUBPATH]
//
// following the purl specification's parsing steps: the scheme is "pkg:"
// (slashes after it are ignored), the type is lower-cased and must be
// letters, digits, '.', '+' and '-' not starting with a digit, the
// version starts at the last @ after the last '/', empty namespace
// segments are dropped, and every namespace segment, the name, the
// version, the qualifier values and the subpath segments are
// percent-decoded. A decoded segment may not contain a '/'.
//
// npm scopes: an npm namespace is one segment (the scope), which may be
// written encoded (%40scope) or, leniently, as @scope. A version is
// required after an @.
//
// Errors are *SyntaxError values wrapping ErrSyntax.
func Parse(s string) (Purl, error) {
	var p Purl
	bad := func(format string, a ...any) (Purl, error) {
		return Purl{}, &SyntaxError{Purl: s, Reason: fmt.Sprintf(format, a...)}
	}
	rest, ok := strings.CutPrefix(s, "pkg:")
	if !ok {
		return bad("must start with pkg:")
	}
	if i := strings.LastIndexByte(rest, '#'); i >= 0 {
		sub, err := parseSubpath(rest[i+1:])
		if err != nil {
			return bad("subpath: %v", err)
		}
		p.Subpath, rest = sub, rest[:i]
	}
	if i := strings.LastIndexByte(rest, '?'); i >= 0 {
		q, err := parseQualifiers(rest[i+1:])
		if err != nil {
			return bad("qualifiers: %v", err)
		}
		p.Qualifiers, rest = q, rest[:i]
	}
	rest = strings.TrimLeft(rest, "/")
	typ, rest, ok := strings.Cut(rest, "/")
	if !ok || typ == "" {
		return bad("want pkg:TYPE/NAME")
	}
	if !validType(typ) {
		return bad("bad type %q", typ)
	}
	p.Type = strings.ToLower(typ)
	rest = strings.TrimRight(rest, "/")
	ns, last := "", rest
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		ns, last = rest[:i], rest[i+1:]
	}
	if i := strings.LastIndexByte(last, '@'); i >= 0 {
		v, err := url.PathUnescape(last[i+1:])
		if err != nil {
			return bad("version: %v", err)
		}
		if v == "" {
			return bad("empty version after @")
		}
		p.Version, last = v, last[:i]
	}
	name, err := url.PathUnescape(last)
	if err != nil {
		return bad("name: %v", err)
	}
	if name == "" {
		return bad("empty name")
	}
	if strings.Contains(name, "/") {
		return bad("name %q contains a slash", name)
	}
	p.Name = name
	var segs []string
	for seg := range strings.SplitSeq(ns, "/") {
		if seg == "" {
			continue
		}
		d, err := url.PathUnescape(seg)
		if err != nil {
			return bad("namespace: %v", err)
		}
		if d == "" || strings.Contains(d, "/") {
			return bad("bad namespace segment %q", d)
		}
		segs = append(segs, d)
	}
	p.Namespace = strings.Join(segs, "/")
	if p.Type == "npm" && len(segs) > 1 {
		return bad("an npm namespace is a scope such as %%40scope")
	}
	return p, nil
}

// validType reports whether t has the characters the spec allows a type.
func validType(t string) bool {
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '.', c == '+', c == '-':
		case c >= '0' && c <= '9':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// parseQualifiers parses the text after the ?: &-separated key=value
// pairs. A pair with an empty value is dropped, as the spec says.
func parseQualifiers(s string) (map[string]string, error) {
	var q map[string]string
	for pair := range strings.SplitSeq(s, "&") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("%q has no =", pair)
		}
		k = strings.ToLower(k)
		if k == "" || strings.Trim(k, "abcdefghijklmnopqrstuvwxyz0123456789.-_") != "" || k[0] >= '0' && k[0] <= '9' {
			return nil, fmt.Errorf("bad key %q", k)
		}
		d, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("value of %s: %w", k, err)
		}
		if d == "" {
			continue
		}
		if _, dup := q[k]; dup {
			return nil, fmt.Errorf("key %s repeated", k)
		}
		if q == nil {
			q = map[string]string{}
		}
		q[k] = d
	}
	return q, nil
}

// parseSubpath parses the text after the #: '/'-separated segments, of
// which empty, "." and ".." ones are dropped.
func parseSubpath(s string) (string, error) {
	var segs []string
	for seg := range strings.SplitSeq(s, "/") {
		d, err := url.PathUnescape(seg)
		if err != nil {
			return "", err
		}
		if d == "" || d == "." || d == ".." {
			continue
		}
		if strings.Contains(d, "/") {
			return "", fmt.Errorf("segment %q contains a slash", d)
		}
		segs = append(segs, d)
	}
	return strings.Join(segs, "/"), nil
}

// String returns p in canonical purl form: every part percent-encoded
// except letters, digits and ".-_~", qualifiers sorted by key. Parse of the
// result returns p again.
func (p Purl) String() string {
	var b strings.Builder
	b.WriteString("pkg:" + p.Type + "/")
	if p.Namespace != "" {
		for seg := range strings.SplitSeq(p.Namespace, "/") {
			b.WriteString(escape(seg) + "/")
		}
	}
	b.WriteString(escape(p.Name))
	if p.Version != "" {
		b.WriteString("@" + escape(p.Version))
	}
	if len(p.Qualifiers) > 0 {
		keys := make([]string, 0, len(p.Qualifiers))
		for k := range p.Qualifiers {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i == 0 {
				b.WriteString("?")
			} else {
				b.WriteString("&")
			}
			b.WriteString(k + "=" + escape(p.Qualifiers[k]))
		}
	}
	if p.Subpath != "" {
		b.WriteString("#")
		for i, seg := range strings.Split(p.Subpath, "/") {
			if i > 0 {
				b.WriteString("/")
			}
			b.WriteString(escape(seg))
		}
	}
	return b.String()
}

// escape percent-encodes every byte of s but the unreserved ones.
func escape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// Of is the package URL of an ecosystem's package name and version (empty
// when unknown): a name's part before its last "/" is the namespace, as
// npm's "@scope/name" is. A Debian package's is Deb's, without an
// architecture. It is "" without an ecosystem or name.
func Of(eco, name, version string) string {
	if eco == "" || name == "" {
		return ""
	}
	if eco == ecosystem.Deb {
		return Deb(name, version, "")
	}
	p := Purl{Type: eco, Name: name, Version: version}
	if i := strings.LastIndexByte(name, '/'); i > 0 {
		p.Namespace, p.Name = name[:i], name[i+1:]
	}
	return p.String()
}

// DebVendor is the namespace Deb gives Debian packages: the vendor of the
// archives the mirror serves (an archive is named by its URL, which does
// not say whose it is, so every deb is Debian's).
const DebVendor = "debian"

// Deb is the package URL of a Debian package, the one spelling that the
// apt broker's pkg.install and the mirror's pkg.fetch share, so that the
// two name one package alike:
//
//	pkg:deb/debian/NAME@VERSION?arch=ARCH
//
// VERSION is the full Debian version, epoch included ("1:2.3-1" is written
// 1%3A2.3-1), and ARCH the package's architecture ("amd64", "all"). An
// empty version or arch is left out; Deb is "" without a name.
func Deb(name, version, arch string) string {
	if name == "" {
		return ""
	}
	p := Purl{Type: ecosystem.Deb, Namespace: DebVendor, Name: name, Version: version}
	if arch != "" {
		p.Qualifiers = map[string]string{"arch": arch}
	}
	return p.String()
}
