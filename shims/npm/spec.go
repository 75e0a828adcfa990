package npm

import (
	"strings"

	"github.com/sandtrail/sandtrail/shims"
)

// The classification follows npm-package-arg (npa.js) of npm 11. The
// expressions compile on first use: the shim runs before every npm call,
// and most of them parse no spec.
var (
	isURL      = shims.LazyRegexp(`(?i)^(?:git[+])?[a-z]+:`)
	isGit      = shims.LazyRegexp(`(?i)^[^@]+@[^:.]+\.[^:]+:.+$`)
	isFileType = shims.LazyRegexp(`(?i)[.](?:tgz|tar\.gz|tar)$`)
	isFile     = shims.LazyRegexp(`^(?:[.]|~[/]|[/]|[a-zA-Z]:)`)
	exactRe    = shims.LazyRegexp(`^\s*[v=]*\s*(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?)\s*$`)
	// validName is validate-npm-package-name's validForOldPackages,
	// loosely: url-safe characters, no leading dot or underscore.
	validName = shims.LazyRegexp(`^(?:@[A-Za-z0-9~*!'()-][A-Za-z0-9._~*!'()-]*/)?[A-Za-z0-9~*!'()-][A-Za-z0-9._~*!'()-]*$`)
)

// parseSpec reads one argv package spec ("left-pad@^1", "@s/p@tag",
// "a@npm:b@1", "github:u/r", "./dir") as npm does. alias is the name the
// package is installed under when it differs from the request's Name.
func parseSpec(arg string) (r shims.Request, alias string) {
	nameEnds := -1
	if len(arg) > 1 {
		if i := strings.IndexByte(arg[1:], '@'); i >= 0 {
			nameEnds = i + 1
		}
	}
	namePart := arg
	if nameEnds > 0 {
		namePart = arg[:nameEnds]
	}
	switch {
	case isURL().MatchString(arg), isGit().MatchString(arg):
		return shims.Request{Source: arg}, ""
	case !strings.HasPrefix(namePart, "@") && (strings.Contains(namePart, "/") || isFileType().MatchString(namePart)):
		return shims.Request{Source: arg}, ""
	case nameEnds > 0:
		return resolveSpec(namePart, arg[nameEnds+1:])
	case validName().MatchString(arg):
		return resolveSpec(arg, "")
	case isFile().MatchString(arg):
		return shims.Request{Source: arg}, ""
	}
	return shims.Request{Source: arg}, ""
}

// resolveSpec classifies spec (a range, tag, alias, URL or path) of name
// as npa's resolve does. A non-registry spec is the request's Source,
// under the name it is installed as; alias is set for an npm: alias.
func resolveSpec(name, spec string) (shims.Request, string) {
	switch {
	case strings.HasPrefix(strings.ToLower(spec), "file:"), isFile().MatchString(spec):
		return shims.Request{Name: name, Source: spec}, ""
	case strings.HasPrefix(strings.ToLower(spec), "npm:"):
		sub, _ := parseSpec(spec[4:])
		if sub.Name == "" {
			// npm refuses an alias of a non-registry spec; keep it.
			return shims.Request{Name: name, Source: spec}, ""
		}
		if sub.Name == name {
			return sub, ""
		}
		return sub, name
	case isURL().MatchString(spec), strings.Contains(spec, "/"), isFileType().MatchString(spec):
		return shims.Request{Name: name, Source: spec}, ""
	}
	r := shims.Request{Name: name, Spec: spec}
	if m := exactRe().FindStringSubmatch(spec); m != nil {
		r.Exact = m[1]
	}
	return r, ""
}

// scopeOf is the scope ("@s") of a package name, "" for none.
func scopeOf(name string) string {
	if !strings.HasPrefix(name, "@") {
		return ""
	}
	s, _, _ := strings.Cut(name, "/")
	return s
}
