package passthrough

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestOnlyTheShimImports: this package's init execs a package manager
// whenever the binary that imports it runs by a manager's name, so only
// the shim binary may import it.
func TestOnlyTheShimImports(t *testing.T) {
	const self = "github.com/sandtrail/sandtrail/shims/passthrough"
	out, err := exec.Command("go", "list", "-test", "-f", `{{.ImportPath}}|{{join .Imports " "}}`, "github.com/sandtrail/sandtrail/...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "|")
		pkg, _, _ = strings.Cut(pkg, " ") // a test variant: "p [p.test]"
		if !slices.Contains(strings.Fields(imports), self) {
			continue
		}
		switch pkg {
		case "github.com/sandtrail/sandtrail/cmd/sandtrail-shim":
			found = true
		case self + ".test":
		default:
			t.Errorf("%s imports %s: only cmd/sandtrail-shim may", pkg, self)
		}
	}
	if !found {
		t.Error("cmd/sandtrail-shim does not import the fast path")
	}
}
