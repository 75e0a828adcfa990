package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/pkgview"
)

// TestManagerModules: npm's and corepack's modules are found in a global
// node_modules and through a bin symlink elsewhere, pip's CLI in each
// Python's packages; what is not installed is not listed.
func TestManagerModules(t *testing.T) {
	root := t.TempDir()
	files := []string{
		"usr/lib/node_modules/npm/lib/cli.js", "usr/lib/node_modules/npm/lib/npm.js",
		"opt/node/lib/node_modules/npm/lib/cli.js", "opt/node/lib/node_modules/npm/bin/npm-cli.js",
		"usr/lib/node_modules/corepack/dist/lib/corepack.cjs",
		"usr/lib/python3/dist-packages/pip/_internal/cli/main.py",
		"usr/local/lib/python3.12/site-packages/pip/_internal/cli/main.py",
	}
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "usr/local/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../opt/node/lib/node_modules/npm/bin/npm-cli.js", filepath.Join(root, "usr/local/bin/npm")); err != nil {
		t.Fatal(err)
	}
	got := managerModules(root)
	var want []string
	for _, f := range []string{"usr/lib/node_modules/npm/lib/cli.js", "usr/lib/node_modules/npm/lib/npm.js",
		"opt/node/lib/node_modules/npm/lib/cli.js", "usr/lib/node_modules/corepack/dist/lib/corepack.cjs",
		"usr/lib/python3/dist-packages/pip/_internal/cli", "usr/local/lib/python3.12/site-packages/pip/_internal/cli"} {
		want = append(want, filepath.Join(root, f))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("managerModules =\n%q\nwant\n%q", got, want)
	}
	// What the host has recorded is what the view counts: each module
	// listed, or a file in a listed directory.
	for _, f := range files {
		if p := filepath.Join(root, f); slices.ContainsFunc(got, func(m string) bool { return p == m || strings.HasPrefix(p, m+"/") }) &&
			!pkgview.IsManagerModule(p) {
			t.Errorf("the host records reads of %s, which the package view does not count as a manager's module", p)
		}
	}
}
