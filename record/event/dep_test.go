package event_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps proves that record/event imports only the standard library, so
// that every producer, the lean shim binary included, can depend on it
// without pulling anything else in.
func TestDeps(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipping: the go command is not on PATH, so the import graph cannot be listed")
	}
	// Standard marks packages of the standard library; the test's own
	// dependencies are left out because only the package is listed.
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list -deps listed %d packages, want the whole import graph:\n%s", len(lines), out)
	}
	self := false
	for _, l := range lines {
		path, std, ok := strings.Cut(l, " ")
		if !ok {
			t.Fatalf("go list -deps: unexpected line %q", l)
		}
		if path == "github.com/sandtrail/sandtrail/record/event" {
			self = true
			continue
		}
		if std != "true" {
			t.Errorf("record/event depends on %s, which is not in the standard library", path)
		}
	}
	if !self {
		t.Errorf("go list -deps did not list record/event itself:\n%s", out)
	}
}
