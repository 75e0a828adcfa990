//go:build 386 || amd64 || arm64

package collector

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
)

// memoryCgroup makes a memory-limited cgroup for an OOM test and returns the
// cgroup.procs file to join it: a v1 memory cgroup beneath this process's own
// on a hybrid host, or the v2 cgroup itself on a pure v2 host.
func memoryCgroup(t *testing.T, cg *cgrouptest.Cgroup, limit string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || f[1] != "memory" {
			continue
		}
		var rnd [6]byte
		rand.Read(rnd[:])
		dir := filepath.Join("/sys/fs/cgroup/memory", f[2], "sandtrail-test-"+hex.EncodeToString(rnd[:]))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Skipf("skipping: making a v1 memory cgroup: %v", err)
		}
		t.Cleanup(func() { cgrouptest.Remove(t, dir) })
		if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(limit), 0o644); err != nil {
			t.Fatalf("setting the memory limit: %v", err)
		}
		// Without swap the limit is reached at once; the files are absent
		// on kernels without swap accounting.
		os.WriteFile(filepath.Join(dir, "memory.swappiness"), []byte("0"), 0o644)
		os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(limit), 0o644)
		return filepath.Join(dir, "cgroup.procs")
	}
	if err := os.WriteFile(filepath.Join(cg.Dir, "memory.max"), []byte(limit), 0o644); err != nil {
		t.Skipf("skipping: no v1 memory controller and no memory.max in the v2 cgroup: %v", err)
	}
	os.WriteFile(filepath.Join(cg.Dir, "memory.swap.max"), []byte("0"), 0o644)
	return filepath.Join(cg.Dir, "cgroup.procs")
}

func TestOOMVictim(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	procs := memoryCgroup(t, cg, "33554432")
	type victim struct {
		cgroup uint64
		pid    int32
		comm   string
	}
	var (
		mu      sync.Mutex
		victims []victim
	)
	r := startRecorder(t, false, WithOOMHandler(func(cgroupID uint64, pid int32, comm string) {
		mu.Lock()
		defer mu.Unlock()
		victims = append(victims, victim{cgroupID, pid, comm})
	}))
	const sid = "sess-oom"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	// tail keeps the whole "line" of /dev/zero in memory until the OOM
	// killer ends it.
	cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$0" && exec /usr/bin/tail /dev/zero`, procs)
	cmd.SysProcAttr = cg.SysProcAttr(t, -1)
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("tail = %v, want killed by SIGKILL", err)
	}
	evs := r.stop(t)
	mu.Lock()
	defer mu.Unlock()
	pid := int32(cmd.Process.Pid)
	if len(victims) != 1 || victims[0] != (victim{cg.ID, pid, "tail"}) {
		t.Errorf("OOM victims = %+v, want [{%d %d tail}]", victims, cg.ID, pid)
	}
	exit := findPid(inSession(evs, sid, event.KindExit), event.KindExit, pid)
	if exit == nil || exit.Proc.Signal != int32(syscall.SIGKILL) || exit.Proc.ExitCode != nil {
		t.Errorf("exit of tail = %+v, want signal 9", exit)
	}
}
