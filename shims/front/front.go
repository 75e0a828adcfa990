// Package front decides the shim's fast path and finds the real package
// manager. When sandtrail-shim is run as a package manager for a call
// that is clearly read-only (`npm --version`, `pip list`, `cargo -V`;
// ReadOnly), package shims/passthrough replaces it with the real manager
// (Lookup) from its init function, before the packages that only
// installs need (the ingest client, the event schema, the planners, the
// JSON, net and regexp packages) are initialized. Every other call, and
// any call the fast path is unsure of, falls through to the shim's main,
// which plans it (docs/shims.md) and, when the plan has no install intent
// either, execs the real manager the same way, found by the same Lookup.
//
// Both paths run the same binary, so the shim's identity (its inode,
// which the daemon compares with each fetching process's ancestors, and
// its path in the shim directory, which the package view reads in exec
// events) is the same on either.
//
// Trust model: argv, the environment and PATH are the agent's, as they
// are the full shim's. The fast path takes only an allowlist of exact
// command words with a manager-specific shape (ReadOnly): a call that
// could install, fetch or build a package, run a package's code or a
// configured alias, or that the full shim would delegate (apt's
// install, reinstall and update), is never on it. A test runs a table of
// argvs through both ReadOnly and each manager's planner, in hostile
// contexts (manifests, aliases, config), and fails if the fast path takes
// a call the planner plans. Non-install calls are not recorded by the
// shim on either path; the kernel records every exec.
//
// It imports only os, so that shims/passthrough's init, which imports it,
// runs early.
package front

import "os"

// The fast path's allowlist, for each command the shim stands in for: the
// argument lists that take it, each an exact argv[1:] or, ending in "*",
// an exact first argument followed by any others. What is left out goes
// to the full shim, which plans it. npx is absent: every npx call runs a
// package. cargo takes no command word, since a cargo alias of one is
// planned (config files, CARGO_ALIAS_*), and apt takes none that the apt
// broker runs. They are slices, not a map, so that they need no init.
var (
	npmReadOnly = [][]string{{"--version"}, {"-v"}, {"--help"}, {"-h"}, {"help", "*"}, {"view", "*"},
		{"info", "*"}, {"ls", "*"}, {"list", "*"}, {"search", "*"}, {"whoami"}, {"ping"}}
	pipReadOnly = [][]string{{"--version"}, {"-V"}, {"--help"}, {"-h"}, {"help", "*"}, {"list", "*"},
		{"show", "*"}, {"freeze", "*"}, {"check"}}
	cargoReadOnly = [][]string{{"--version"}, {"-V"}, {"--help"}, {"-h"}, {"--list"}}
	aptReadOnly   = [][]string{{"--version"}, {"-v"}, {"--help"}, {"-h"}, {"list", "*"}, {"show", "*"},
		{"search", "*"}, {"policy", "*"}}
)

// Commands are the commands the fast path has an allowlist for; each is a
// command the shim stands in for (a test checks).
func Commands() []string { return []string{"npm", "pip", "pip3", "cargo", "apt", "apt-get"} }

// Forms is the allowlist of command name, nil for one it has none for.
// The slices are the allowlist's own: callers must not change them.
func Forms(name string) [][]string {
	switch name {
	case "npm":
		return npmReadOnly
	case "pip", "pip3":
		return pipReadOnly
	case "cargo":
		return cargoReadOnly
	case "apt", "apt-get":
		return aptReadOnly
	}
	return nil
}

// ReadOnly reports whether the call name args (args exclude argv[0]) is
// on the fast path's allowlist: clearly read-only whatever the working
// directory, environment and configuration. It is false for a name the
// shim does not stand in for.
func ReadOnly(name string, args []string) bool {
	for _, form := range Forms(name) {
		if matches(form, args) {
			return true
		}
	}
	return false
}

// matches reports whether args has form's shape: its words exactly, or,
// when form ends in "*", its words before that followed by any arguments.
func matches(form, args []string) bool {
	n := len(form)
	any := n > 0 && form[n-1] == "*"
	if any {
		n--
	}
	if len(args) < n || !any && len(args) != n {
		return false
	}
	for i := range n {
		if args[i] != form[i] {
			return false
		}
	}
	return true
}

// RealEnv is the variable naming the real manager name's path:
// SANDTRAIL_REAL_<NAME>, upper case, with "-" and "." as "_"
// (SANDTRAIL_REAL_APT_GET).
func RealEnv(name string) string {
	b := []byte("SANDTRAIL_REAL_" + name)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c == '-' || c == '.':
			b[i] = '_'
		}
	}
	return string(b)
}

// Lookup finds name on path (a PATH value): the first executable regular
// file of that name in an absolute directory that is not the file self
// (the shim, however it is linked there). A relative entry is never used.
func Lookup(name, path string, self os.FileInfo) (string, bool) {
	start := 0
	for i := 0; i <= len(path); i++ {
		if i < len(path) && path[i] != ':' {
			continue
		}
		dir := path[start:i]
		start = i + 1
		if dir == "" || dir[0] != '/' {
			continue
		}
		p := dir + "/" + name
		if dir[len(dir)-1] == '/' {
			p = dir + name
		}
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 || self != nil && os.SameFile(fi, self) {
			continue
		}
		return p, true
	}
	return "", false
}

// Name is the command a shim was run as: argv[0]'s last element.
func Name(argv0 string) string {
	for i := len(argv0) - 1; i >= 0; i-- {
		if argv0[i] == '/' {
			return argv0[i+1:]
		}
	}
	return argv0
}
