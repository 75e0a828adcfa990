//go:build 386 || amd64 || arm64

package collector

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/kernel/seccomp"
	"github.com/sandtrail/sandtrail/record/event"
)

func init() { helperModes["deny"] = helperDeny }

// helperDeny installs the default session filter on its thread and makes
// syscalls that it refuses (io_uring_setup, bpf, unshare and clone with
// CLONE_NEWUSER) and others that fail with EPERM or succeed without it.
func helperDeny([]string) int {
	runtime.LockOSThread() // never unlocked: the thread keeps the filter
	f, err := seccomp.New(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	err = f.Start(func() error {
		unix.Syscall(unix.SYS_IO_URING_SETUP, 0, 0, 0)
		unix.Syscall(unix.SYS_BPF, 0xffff, 0, 0)
		unix.Syscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER|1, 0, 0)
		unix.Syscall(unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_FS, 0, 0)
		// Not refusals: clone fails with EINVAL, and the setuid below
		// fails with EPERM but is not on the list.
		unix.Syscall(unix.SYS_CLONE, unix.CLONE_NEWNS|unix.CLONE_FS, 0, 0)
		unix.Setresuid(-1, -1, -1)
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// TestDenied checks that each refusal of the session filter in a watched
// cgroup becomes one process.denied naming the syscall, and nothing else
// does.
func TestDenied(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	r := startRecorder(t, false)
	const sid = "sess-denied"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=deny")
	cmd.SysProcAttr = cg.SysProcAttr(t, -1)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	evs := r.stop(t)
	var got []string
	for _, ev := range inSession(evs, sid, event.KindDenied) {
		if ev.Proc.Pid != int32(cmd.Process.Pid) || ev.Proc.Errno != "EPERM" || ev.Proc.UID == nil || ev.Proc.CgroupID != cg.ID {
			t.Errorf("process.denied proc = %+v, want pid %d, errno EPERM, a uid and cgroup %d", ev.Proc, cmd.Process.Pid, cg.ID)
		}
		got = append(got, ev.Proc.Syscall)
	}
	want := []string{"io_uring_setup", "bpf", "unshare", "clone"}
	if !slices.Equal(got, want) {
		t.Errorf("process.denied syscalls = %q, want %q", got, want)
	}
}

func TestDecodeDenied(t *testing.T) {
	d := &decoder{bootOffset: 1, session: func(uint64) string { return "s" }}
	ev, _, err := d.toEvent(denyRecord(2))
	if err != nil {
		t.Fatalf("toEvent(deny record) = %v", err)
	}
	if ev.Kind != event.KindDenied || ev.Proc.Syscall != denySyscalls[2] || ev.Proc.Errno != "EPERM" || ev.SessionID != "s" {
		t.Errorf("toEvent(deny record) = %+v %+v, want process.denied of %s", ev, ev.Proc, denySyscalls[2])
	}
	if _, _, err := d.toEvent(denyRecord(uint32(len(denySyscalls)))); err == nil {
		t.Errorf("toEvent(deny record of index %d) = nil error, want one", len(denySyscalls))
	}
}

func denyRecord(syscall uint32) []byte {
	var ev denyDenyEvent
	h := header(processEventKindKIND_DENIED, 100, "python3")
	copy(asBytes(&ev.Hdr), asBytes(&h))
	ev.Uid, ev.Syscall = 1000, syscall
	return fixedRecord(ev)
}
