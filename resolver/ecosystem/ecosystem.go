// Package ecosystem is the one ordered list of the ecosystems sandtrail
// knows, with each one's facts that need no version parser: its name (also
// its purl type), what a purl namespace means in it, its package manager
// and the commands that run it, where the mirror serves it from which
// upstream, and its name in OSV records.
//
// It is the resolver's leaf: programs that only name an ecosystem or its
// managers (the shim, which starts before every package-manager call)
// import it without the resolver's version parsers. Package resolver
// builds its Ecosystem values from this list, in this order, adding each
// one's version grammar; every other list of ecosystems or managers in the
// tree is generated from it or checked against it by a test.
package ecosystem

import (
	"slices"
	"strings"
)

// The names of the ecosystems, which are also their purl types.
const (
	NPM   = "npm"
	PyPI  = "pypi"
	Cargo = "cargo"
	Deb   = "deb"
	OCI   = "oci"
)

// list is the one place where ecosystems are registered, in the order in
// which List returns them and messages list them.
var list = []Info{
	{Name: NPM, Namespace: Scope, Manager: "npm", Aliases: []string{"npx"},
		MirrorPrefix: "/npm/", Upstream: "https://registry.npmjs.org/", OSV: "npm",
		CacheDirs: []string{"/.npm/_cacache/", "/.npm/_logs/", "/.npm/_update-notifier-last-checked"},
		CodeDirs:  []string{"/usr/lib/node_modules/npm/", "/usr/share/nodejs/"}},
	{Name: PyPI, Namespace: NoNamespace, Manager: "pip", Aliases: []string{"pip3"},
		MirrorPrefix: "/pypi/", Upstream: "https://pypi.org/simple/", OSV: "PyPI",
		CacheDirs: []string{"/.cache/pip/", "/tmp/pip-"},
		CodeDirs:  []string{"/usr/lib/python3/dist-packages/pip/"}},
	{Name: Cargo, Namespace: NoNamespace, Manager: "cargo",
		MirrorPrefix: "/crates/", Upstream: "https://index.crates.io/", OSV: "crates.io",
		CacheDirs: []string{"/.cargo/registry/cache/", "/.cargo/registry/index/", "/.cargo/.package-cache"}},
	{Name: Deb, Namespace: Vendor, Manager: "apt", Aliases: []string{"apt-get"},
		MirrorPrefix: "/debian/", Upstream: "http://deb.debian.org/debian/", OSV: "Debian",
		CacheDirs: []string{"/var/cache/apt/", "/var/lib/apt/lists/"}},
	{Name: OCI, Namespace: Path,
		MirrorPrefix: "/v2/", Upstream: "https://registry-1.docker.io"},
}

// Info is an ecosystem's facts that need no version parser.
type Info struct {
	// Name is the ecosystem's name, which is also its purl type.
	Name string
	// Namespace says what the namespace of its purls is.
	Namespace Namespace
	// Manager is the package manager whose installs pkg events record
	// ("pip" for pip3 too), and whose commands the shim stands in for;
	// "" for none (OCI).
	Manager string
	// Aliases are the other commands that run the manager: npx, pip3,
	// apt-get.
	Aliases []string
	// MirrorPrefix is the path the mirror serves the ecosystem beneath
	// ("/npm/").
	MirrorPrefix string
	// Upstream is the registry the mirror fetches from unless configured
	// otherwise.
	Upstream string
	// OSV is the ecosystem's name in OSV records ("npm", "PyPI",
	// "crates.io", "Debian"); "" for none (OCI). See FromOSV.
	OSV string
	// CacheDirs are the manager's own cache, log and scratch directories
	// ("/.npm/_cacache/", "/tmp/pip-"), CodeDirs its own code as Debian
	// installs it: see Noise. An entry that begins "/." is beneath a home
	// directory, anywhere in a path; any other is a path's prefix.
	CacheDirs, CodeDirs []string
}

// Noise reports whether a file event (its op, path, and a rename's new
// path) is a package manager's bookkeeping, which views of the record hide
// unless asked (and count): a create, write, read, truncate or delete
// beneath a manager's cache, log or scratch directory, a rename within
// them, or a read of a manager's own code. Never a link or chmod, a rename
// into or out of them, nor a write of a manager's code. A view decides
// sensitivity first (a sensitive path is never noise) and keeps what a
// link the session made leads to. Nothing is dropped from the record.
func Noise(op, path, newPath string) bool {
	for _, e := range list {
		switch op {
		case "create", "write", "read", "truncate", "delete":
			if beneath(path, e.CacheDirs) {
				return true
			}
		case "rename":
			if beneath(path, e.CacheDirs) && beneath(newPath, e.CacheDirs) {
				return true
			}
		}
		if op == "read" && beneath(path, e.CodeDirs) {
			return true
		}
	}
	return false
}

// beneath reports whether path is beneath one of dirs, as CacheDirs and
// CodeDirs name them.
func beneath(path string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(d, "/.") && strings.Contains(path, d) || strings.HasPrefix(path, d) {
			return true
		}
	}
	return false
}

// Commands returns the commands that run the ecosystem's manager, the
// manager's own name first, then its aliases; none without a manager.
func (i Info) Commands() []string {
	if i.Manager == "" {
		return nil
	}
	return append([]string{i.Manager}, i.Aliases...)
}

// A Namespace says what the namespace of an ecosystem's purl
// (pkg:TYPE/NAMESPACE/NAME) is.
type Namespace int

const (
	// NoNamespace: names have none (PyPI, Cargo).
	NoNamespace Namespace = iota
	// Scope: the namespace is an @scope, and part of the name:
	// "@babel/core" (npm).
	Scope
	// Vendor: the namespace names the distribution (pkg:deb/debian/curl)
	// and is not part of the name (Debian).
	Vendor
	// Path: the name is a repository path, and the namespace is its
	// leading segments: "library/alpine" (OCI).
	Path
)

// List returns every ecosystem, in a fixed order: npm, pypi, cargo, deb,
// oci. The caller may change what it returns.
func List() []Info {
	out := slices.Clone(list)
	for i := range out {
		out[i].Aliases = slices.Clone(out[i].Aliases)
		out[i].CacheDirs, out[i].CodeDirs = slices.Clone(out[i].CacheDirs), slices.Clone(out[i].CodeDirs)
	}
	return out
}

// FromOSV returns the ecosystem an OSV record's affected[].package.ecosystem
// names: "npm", "PyPI", "crates.io", or "Debian" with or without a release
// after a colon ("Debian:12"). OSV's names are case-sensitive, as its schema
// says; ok is false for an ecosystem sandtrail does not record (RubyGems,
// Go, Maven, ...).
func FromOSV(name string) (info Info, ok bool) {
	base, _, _ := strings.Cut(name, ":")
	for _, e := range list {
		if e.OSV != "" && e.OSV == base {
			e.Aliases, e.CacheDirs, e.CodeDirs = slices.Clone(e.Aliases), slices.Clone(e.CacheDirs), slices.Clone(e.CodeDirs)
			return e, true
		}
	}
	return Info{}, false
}

// Lookup returns the ecosystem named name; ok is false for none.
func Lookup(name string) (info Info, ok bool) {
	for _, e := range list {
		if e.Name == name {
			e.Aliases, e.CacheDirs, e.CodeDirs = slices.Clone(e.Aliases), slices.Clone(e.CacheDirs), slices.Clone(e.CodeDirs)
			return e, true
		}
	}
	return Info{}, false
}
