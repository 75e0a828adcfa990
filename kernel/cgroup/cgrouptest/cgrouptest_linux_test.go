package cgrouptest

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/kernel/cgroup"
)

// TestNew makes a cgroup and a child, runs a process in the child, and
// checks that both are gone after the test's cleanup.
func TestNew(t *testing.T) {
	var parent, child *Cgroup
	t.Run("make", func(t *testing.T) {
		parent = New(t)
		child = parent.Child(t, "inner")
		own, err := cgroup.Own()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(parent.Path, own+"/") && !(own == "/" && strings.HasPrefix(parent.Path, "/")) {
			t.Errorf("New().Path = %q, want it beneath the own cgroup %q", parent.Path, own)
		}
		if child.Path != parent.Path+"/inner" || child.ID == parent.ID || child.ID == 0 {
			t.Errorf("Child() = %+v, want inner beneath %+v with its own id", child, parent)
		}
		if id, err := cgroup.ID(child.Dir); err != nil || id != child.ID {
			t.Errorf("cgroup.ID(%s) = %d, %v, want %d", child.Dir, id, err, child.ID)
		}
		out, err := (&exec.Cmd{Path: "/bin/cat", Args: []string{"cat", "/proc/self/cgroup"}, SysProcAttr: child.SysProcAttr(t, -1)}).Output()
		if err != nil {
			t.Fatalf("running cat in the child cgroup: %v", err)
		}
		if p, err := cgroup.V2Path(out); err != nil || p != child.Path {
			t.Errorf("cat's v2 cgroup = %q, %v, want %q", p, err, child.Path)
		}
		if err := child.ExecStorm(t, 10, 2); err != nil {
			t.Errorf("ExecStorm(10, 2) = %v", err)
		}
		sleep := exec.Command("/bin/sleep", "60")
		if err := sleep.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { sleep.Process.Kill(); sleep.Wait() }()
		parent.Move(t, sleep.Process.Pid)
		b, err := os.ReadFile(parent.Dir + "/cgroup.procs")
		if err != nil || !slices.Contains(strings.Fields(string(b)), strconv.Itoa(sleep.Process.Pid)) {
			t.Errorf("cgroup.procs after Move = %q, %v, want pid %d", b, err, sleep.Process.Pid)
		}
	})
	if parent == nil {
		return
	}
	for _, c := range []*Cgroup{child, parent} {
		if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s after cleanup: %v, want it removed", c.Dir, err)
		}
	}
}
