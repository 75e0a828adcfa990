package host

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
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
}
