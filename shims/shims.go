// Package shims holds what the package-manager shims share: the plan a
// manager's parser makes of one invocation, and what its read-back reports.
// The per-manager parts live in the subpackages npm, pip, cargo and apt;
// cmd/sandtrail-shim lists them once, in order, and runs them.
//
// Trust model: a shim runs as the agent, with the agent's permissions, so
// it is the agent's own account of what it installed (the record marks its
// events source "shim"). What it says is checked against what the mirror
// served (the daemon joins the two) and what the kernel saw the real
// manager do. A parser must never be fooled into hiding an install: an
// invocation it cannot read is planned as an install of unknown packages,
// never as a call without install intent.
//
// Like the shim binary, this package and its subpackages stay lean: the
// standard library, record/event, record/ingest's client and resolver/purl
// (a deps test checks the binary). Shim runs one invocation: it finds the
// real manager, checks the plan's requests with the daemon, runs the
// manager transparently and records what Collect read back.
package shims

// Request is one package that an invocation asked for, as its argv or a
// manifest (package.json, requirements.txt, Cargo.toml) names it.
type Request struct {
	// Name is the package name as the ecosystem writes it ("@scope/name"),
	// or empty when only the source names the package (a URL, a path).
	Name string `json:"name,omitempty"`
	// Spec is the requested spec as written: "^1.3.0", ">=1.0,<2", "=2.3";
	// empty for "any version".
	Spec string `json:"spec,omitempty"`
	// Exact is the version that Spec pins, when it pins one.
	Exact string `json:"exact,omitempty"`
	// Source is a direct URL, git URL or local path, when the request
	// names one instead of a registry package.
	Source string `json:"source,omitempty"`
	// Registry is the registry or index that the invocation names
	// (--registry, --index-url, --extra-index-url, a Cargo.toml
	// `registry =`), when it names one.
	Registry string `json:"registry,omitempty"`
	// Origin is where the request was read: "argv", "package.json",
	// "requirements.txt:3", "Cargo.toml".
	Origin string `json:"origin,omitempty"`
}

// Package is one package that an install resolved, as the read-back after
// the real manager ran reports it.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// SourceURL is where the artifact was fetched from.
	SourceURL string `json:"source_url,omitempty"`
	// Hash is the artifact's hash: an SRI string ("sha512-<base64>") for
	// npm, "sha256:<hex>" for pip, cargo and deb.
	Hash string `json:"hash,omitempty"`
	// Direct is true for a package the invocation (or its manifest) asked
	// for by name; Requested is then its spec.
	Direct    bool   `json:"direct"`
	Requested string `json:"requested,omitempty"`
	// RequestedBy names one package that depends on this one (npm: the
	// first of RequiredBy; pip and cargo: one on the way to a direct one).
	RequestedBy string `json:"requested_by,omitempty"`
	// RequiredBy names every package that depends on this one, sorted
	// (npm: its parents in the installed tree, a direct one's too).
	RequiredBy []string `json:"required_by,omitempty"`
	// InstallScripts are the install-time scripts the package declares
	// (npm's preinstall, install, postinstall; a cargo build script).
	InstallScripts []string `json:"install_scripts,omitempty"`
	// Path is where the package was installed, relative to the tree's
	// root (npm: "node_modules/a/node_modules/b"); a package installed at
	// two paths is two Packages.
	Path string `json:"path,omitempty"`
	// BundledIn is the purl of the package whose artifact carried this
	// one (an npm bundled dependency), empty for one fetched by itself.
	BundledIn string `json:"bundled_in,omitempty"`
}

// Plan is what a shim does for one invocation with install intent.
type Plan struct {
	// Requests are the packages asked for, checked against the policy
	// before the real manager runs.
	Requests []Request
	// Args, when not nil, replace the invocation's arguments for the real
	// binary (pip's gain --report).
	Args []string
	// Env is added to the real binary's environment.
	Env []string
	// Collect reads back what the install resolved. It runs after the real
	// binary exited, with its exit code; it may be nil.
	Collect func(exit int) ([]Package, error)
	// Cleanup removes what the plan made; it may be nil.
	Cleanup func()
}

// Context is what a planner may read about the invocation.
type Context struct {
	// Dir is the working directory.
	Dir string
	// Getenv reads the invocation's environment.
	Getenv func(string) string
	// Environ lists the invocation's environment, in order, for managers
	// that read variables by a pattern (npm's npm_config_*, in any case);
	// it may be nil.
	Environ func() []string
	// Mirror is the verifying mirror's base URL ("http://127.0.0.1:8480"),
	// empty when the session has none.
	Mirror string
	// TempDir is a directory of the shim's own for report files; it is
	// removed after Collect.
	TempDir string
}

// Planner plans one invocation of a manager (args exclude argv[0]). A nil
// plan with a nil error means the invocation has no install intent and
// runs untouched. An error means the invocation cannot be checked (a
// requirements file that cannot be read); the shim refuses it.
type Planner func(args []string, c Context) (*Plan, error)
