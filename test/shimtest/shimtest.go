// Package shimtest builds sandtrail-shim for tests and benchmarks as
// install.sh does (static, trimmed) and links it in a shim directory
// under the names of the managers it stands in for.
package shimtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build builds sandtrail-shim at out.
func Build(out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "github.com/sandtrail/sandtrail/cmd/sandtrail-shim")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building sandtrail-shim: %v\n%s", err, b)
	}
	return nil
}

// Link makes dir (0755) and links shim in it as each of names, or, with no
// names, as every manager `sandtrail-shim list` names.
func Link(shim, dir string, names ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if len(names) == 0 {
		out, err := exec.Command(shim, "list").Output()
		if err != nil {
			return fmt.Errorf("sandtrail-shim list: %w", err)
		}
		names = strings.Fields(string(out))
	}
	for _, n := range names {
		if err := os.Symlink(shim, filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}
