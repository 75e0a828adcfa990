// Package ecosystem names the ecosystems, which are also their purl types.
// It is the resolver's leaf: programs that only name an ecosystem (the
// shims, which start before every package-manager call) import it without
// the resolver's version parsers. The resolver re-exports the names
// (resolver.NPM is ecosystem.NPM) beside the facts it registers for each.
package ecosystem

// The names of the ecosystems.
const (
	NPM   = "npm"
	PyPI  = "pypi"
	Cargo = "cargo"
	Deb   = "deb"
	OCI   = "oci"
)
