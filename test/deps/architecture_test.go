package deps

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureNamesEveryPackage keeps the package table of
// docs/architecture.md and the tree in step: every package the module
// builds (but the end-to-end tests under test/ and the helpers for tests,
// whose names end in "test") has its row, and every row names a package.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	gobin := goCommand(t)
	root := moduleRoot(t, gobin)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := packageRows(string(doc))
	if len(rows) == 0 {
		t.Fatal("docs/architecture.md has no package table (a table whose header is | package | what it is |)")
	}
	out, err := exec.Command(gobin, "list", "-f", "{{.ImportPath}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(p, module+"/")
		if strings.HasPrefix(rel, "test/") || strings.HasSuffix(filepath.Base(rel), "test") {
			continue
		}
		pkgs = append(pkgs, rel)
	}
	for _, p := range pkgs {
		if !slices.Contains(rows, p) {
			t.Errorf("docs/architecture.md has no row for package %s: add one sentence on what it is", p)
		}
	}
	for _, r := range rows {
		if !slices.Contains(pkgs, r) {
			t.Errorf("docs/architecture.md has a row for %s, which is not a package of the module", r)
		}
	}
}

var packageRow = regexp.MustCompile("^\\| `([^`]+)` \\|")

// packageRows returns the packages named in the first column of the
// table headed "| package | what it is |".
func packageRows(doc string) []string {
	var rows []string
	in := false
	for _, l := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(l, "| package | what it is |"):
			in = true
		case in && !strings.HasPrefix(l, "|"):
			return rows
		case in:
			if m := packageRow.FindStringSubmatch(l); m != nil {
				rows = append(rows, m[1])
			}
		}
	}
	return rows
}
