//go:build linux && (amd64 || arm64)

package seccomp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/kernel/cgroup"
)

// The test binary runs itself in two roles, chosen by helperEnv: a launcher
// that installs a filter with Start and forks a probe from the filtered
// thread, as the session launcher does, and the probe, which makes the
// syscalls and prints their errnos.
const helperEnv = "SANDTRAIL_SECCOMP_HELPER"

func TestMain(m *testing.M) {
	switch role, arg, _ := strings.Cut(os.Getenv(helperEnv), ":"); role {
	case "launch":
		os.Exit(launch(arg))
	case "probe":
		os.Exit(probeMain())
	}
	os.Exit(m.Run())
}

// probes are syscalls with arguments that the kernel rejects without doing
// anything (EINVAL, EBADF, EFAULT for root), so that only the filter can
// make them fail with EPERM or ENOSYS. clone3 passes (see Start). unshare with CLONE_NEWUSER carries a
// bogus flag (1) and clone carries CLONE_FS, both invalid with it.
var probes = []struct {
	name string
	nr   uintptr
	args [6]uintptr
}{
	{"io_uring_setup", unix.SYS_IO_URING_SETUP, [6]uintptr{0, 0}},
	{"io_uring_enter", unix.SYS_IO_URING_ENTER, [6]uintptr{^uintptr(0)}},
	{"io_uring_register", unix.SYS_IO_URING_REGISTER, [6]uintptr{^uintptr(0)}},
	{"clone newuser", unix.SYS_CLONE, [6]uintptr{unix.CLONE_NEWUSER | unix.CLONE_FS}},
	{"clone", unix.SYS_CLONE, [6]uintptr{unix.CLONE_NEWNS | unix.CLONE_FS}},
	{"unshare newuser", unix.SYS_UNSHARE, [6]uintptr{unix.CLONE_NEWUSER | 1}},
	{"unshare", unix.SYS_UNSHARE, [6]uintptr{1}},
	{"clone3", unix.SYS_CLONE3, [6]uintptr{0, 0}},
	{"setns newuser", unix.SYS_SETNS, [6]uintptr{^uintptr(0), unix.CLONE_NEWUSER}},
	{"setns any", unix.SYS_SETNS, [6]uintptr{^uintptr(0), 0}},
	{"setns net", unix.SYS_SETNS, [6]uintptr{^uintptr(0), unix.CLONE_NEWNET}},
	{"bpf", unix.SYS_BPF, [6]uintptr{0xffff}},
	{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, [6]uintptr{0, 0, ^uintptr(0), ^uintptr(0)}},
	{"userfaultfd", unix.SYS_USERFAULTFD, [6]uintptr{0xffffffff}},
	{"kexec_load", unix.SYS_KEXEC_LOAD, [6]uintptr{0, 0, 0, 0x100}},
	{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD, [6]uintptr{^uintptr(0), ^uintptr(0), 0, 0, 0x100}},
	{"init_module", unix.SYS_INIT_MODULE, [6]uintptr{0, 0, 0}},
	{"finit_module", unix.SYS_FINIT_MODULE, [6]uintptr{^uintptr(0), 0, 0}},
	{"delete_module", unix.SYS_DELETE_MODULE, [6]uintptr{uintptr(unsafe.Pointer(&[]byte{0}[0])), 0}},
	{"getpid", unix.SYS_GETPID, [6]uintptr{}},
}

// probeResult is what the probe prints.
type probeResult struct {
	Errno      map[string]int
	Seccomp    string // the Seccomp line of /proc/self/status
	NoNewPrivs string
}

func probeMain() int {
	r := probeResult{Errno: map[string]int{}}
	for _, p := range probes {
		_, _, e := unix.Syscall6(p.nr, p.args[0], p.args[1], p.args[2], p.args[3], p.args[4], p.args[5])
		r.Errno[p.name] = int(e)
	}
	if runtime.GOARCH == "amd64" {
		_, _, e := unix.Syscall(unix.SYS_GETPID|x32Bit, 0, 0, 0)
		r.Errno["x32 getpid"] = int(e)
	}
	st, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(st), "\n") {
		k, v, _ := strings.Cut(l, ":")
		switch k {
		case "Seccomp":
			r.Seccomp = strings.TrimSpace(v)
		case "NoNewPrivs":
			r.NoNewPrivs = strings.TrimSpace(v)
		}
	}
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

// launch starts a probe as the session launcher does: from a locked thread
// that is never unlocked, into a cgroup with CLONE_INTO_CGROUP (clone3),
// with the filter of allow ("-" for no filter). After the probe it checks
// that no thread of this process is filtered.
func launch(allow string) int {
	cgDir, err := cgroup.OwnDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "finding own cgroup:", err)
		return 2
	}
	cg, err := os.Open(cgDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=probe")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if allow == "-" {
			errc <- cmd.Start()
			return
		}
		var groups []string
		if allow != "" {
			groups = strings.Split(allow, ",")
		}
		f, err := New(groups)
		if err != nil {
			errc <- err
			return
		}
		filterTid = unix.Gettid()
		errc <- f.Start(cmd.Start)
	}()
	if err := <-errc; err != nil {
		fmt.Fprintln(os.Stderr, "starting probe:", err)
		return 2
	}
	if err := cmd.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		return 2
	}
	return unfilteredThreads()
}

// unfilteredThreads returns 0 when no thread of this process but the
// launching one has a filter, 3 otherwise. The launching thread ends with
// its goroutine, unless it is the main thread, which Go keeps (idle) then.
func unfilteredThreads() int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for _, e := range ents {
		st, err := os.ReadFile("/proc/self/task/" + e.Name() + "/status")
		if err == nil && !bytes.Contains(st, []byte("Seccomp:\t0")) && e.Name() != strconv.Itoa(filterTid) {
			fmt.Fprintf(os.Stderr, "thread %s of the launcher is filtered (the launching thread was %d)\n", e.Name(), filterTid)
			return 3
		}
	}
	return 0
}

// filterTid is the launching thread's id.
var filterTid int

func runProbe(t *testing.T, allow string) probeResult {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=launch:"+allow)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("launcher with allow %q: %v\n%s", allow, err, errb.String())
	}
	var r probeResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("decoding probe output %q: %v", out.String(), err)
	}
	return r
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the probe's syscalls reject their arguments only for root (unprivileged ones fail with EPERM anyway)")
	}
	if _, err := cgroup.OwnDir(); err != nil {
		t.Skipf("no v2 cgroup to start the probe into: %v", err)
	}
}

// TestStartRefuses runs the filter for real: every refused syscall fails
// with EPERM (clone3 and foreign ABIs with ENOSYS) and the others reach the
// kernel, which fails them as it does without a filter.
func TestStartRefuses(t *testing.T) {
	needRoot(t)
	base := runProbe(t, "-")
	tests := []struct {
		allow string
		want  map[string]unix.Errno // probes not named fail as without a filter
	}{
		{"", map[string]unix.Errno{
			"io_uring_setup": unix.EPERM, "io_uring_enter": unix.EPERM, "io_uring_register": unix.EPERM,
			"clone newuser": unix.EPERM, "unshare newuser": unix.EPERM,
			"setns newuser": unix.EPERM, "setns any": unix.EPERM,
			"bpf": unix.EPERM, "perf_event_open": unix.EPERM, "userfaultfd": unix.EPERM,
			"kexec_load": unix.EPERM, "kexec_file_load": unix.EPERM,
			"init_module": unix.EPERM, "finit_module": unix.EPERM, "delete_module": unix.EPERM,
			"x32 getpid": unix.ENOSYS,
		}},
		{"io_uring,user_namespaces", map[string]unix.Errno{
			"bpf": unix.EPERM, "perf_event_open": unix.EPERM, "userfaultfd": unix.EPERM,
			"kexec_load": unix.EPERM, "kexec_file_load": unix.EPERM,
			"init_module": unix.EPERM, "finit_module": unix.EPERM, "delete_module": unix.EPERM,
			"x32 getpid": unix.ENOSYS,
		}},
	}
	for name, e := range tests[0].want {
		if name != "x32 getpid" && unix.Errno(base.Errno[name]) == e {
			t.Fatalf("without a filter %s fails with %v too: the probe cannot tell the filter's refusal apart", name, e)
		}
	}
	for _, tt := range tests {
		t.Run("allow="+tt.allow, func(t *testing.T) {
			r := runProbe(t, tt.allow)
			for _, p := range append(probes, struct {
				name string
				nr   uintptr
				args [6]uintptr
			}{name: "x32 getpid"}) {
				if p.name == "x32 getpid" && runtime.GOARCH != "amd64" {
					continue
				}
				want, ok := tt.want[p.name]
				if !ok {
					want = unix.Errno(base.Errno[p.name])
				}
				if got := unix.Errno(r.Errno[p.name]); got != want {
					t.Errorf("%s under allow %q = %v (%d), want %v (%d)", p.name, tt.allow, got, got, want, want)
				}
			}
			if r.Seccomp != "2" || r.NoNewPrivs != "1" {
				t.Errorf("probe status Seccomp %q NoNewPrivs %q, want 2 and 1", r.Seccomp, r.NoNewPrivs)
			}
		})
	}
}
