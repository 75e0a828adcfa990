package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// managerModules lists the core modules of the package managers installed
// on this host, beneath root ("/" but in tests), whose reads the collector
// records so that the package view sees a manager run around its shim
// whatever its entry script is named (pkgview's shim_bypass by the module
// read): npm's lib/cli.js and lib/npm.js, pip's _internal/cli/ (its main and
// base command, source and compiled) and corepack's dist/lib/corepack.cjs.
// npm and corepack are found in the usual global node_modules and through
// npm and corepack on the usual bin directories (symlinks resolved), pip in
// every system Python's site and dist packages. Only paths that exist are
// listed.
func managerModules(root string) []string {
	var out []string
	add := func(p string) {
		if _, err := os.Stat(p); err == nil && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	var npmDirs, corepackDirs []string
	for _, lib := range []string{"usr/lib/node_modules", "usr/local/lib/node_modules"} {
		npmDirs = append(npmDirs, filepath.Join(root, lib, "npm"))
		corepackDirs = append(corepackDirs, filepath.Join(root, lib, "corepack"))
	}
	for _, bin := range []string{"usr/local/bin", "usr/bin", "bin"} {
		if p, err := filepath.EvalSymlinks(filepath.Join(root, bin, "npm")); err == nil {
			if d, ok := strings.CutSuffix(p, "/bin/npm-cli.js"); ok {
				npmDirs = append(npmDirs, d)
			}
		}
		if p, err := filepath.EvalSymlinks(filepath.Join(root, bin, "corepack")); err == nil {
			if d, ok := strings.CutSuffix(p, "/dist/corepack.js"); ok {
				corepackDirs = append(corepackDirs, d)
			}
		}
	}
	for _, d := range npmDirs {
		add(filepath.Join(d, "lib", "cli.js"))
		add(filepath.Join(d, "lib", "npm.js"))
	}
	for _, d := range corepackDirs {
		add(filepath.Join(d, "dist", "lib", "corepack.cjs"))
	}
	for _, g := range []string{"usr/lib/python3/dist-packages", "usr/lib/python3*/site-packages", "usr/lib/python3*/dist-packages",
		"usr/local/lib/python3*/site-packages", "usr/local/lib/python3*/dist-packages"} {
		dirs, _ := filepath.Glob(filepath.Join(root, g))
		for _, d := range dirs {
			add(filepath.Join(d, "pip", "_internal", "cli"))
		}
	}
	return out
}
