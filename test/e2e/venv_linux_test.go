package e2e

import (
	"os"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// TestRunVenvNoAlert: `python3 -m venv` in a session installs pip (and
// setuptools) from the wheels the system bundles (ensurepip): clean work,
// which the kernel's read-back of installs accounts for by the host's
// root-owned wheels, so the record holds no alert.
func TestRunVenvNoAlert(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/share/python-wheels"); err != nil {
		t.Skip("no /usr/share/python-wheels (python3-venv's wheels)")
	}
	e := newEnv(t)
	r := e.run("--timeout", "3m", "--", "sh", "-c", `/usr/bin/python3 -m venv "$HOME/v" && ls "$HOME"/v/lib/python3*/site-packages`)
	if r.code != 0 {
		t.Fatalf("python3 -m venv: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	evs := e.events(r.summary.SessionID)
	if a := kinds(evs, event.KindAlert); len(a) != 0 {
		t.Errorf("python3 -m venv raised %d alerts:\n%s", len(a), alertLines(evs))
	}
	e.verify()
}
