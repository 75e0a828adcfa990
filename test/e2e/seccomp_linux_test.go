package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/record/event"
)

// seccompHelper makes, for each argument, the syscall it names and prints
// "NAME RESULT" (OK or the errno): io_uring (io_uring_setup of a one-entry
// ring), clone-newuser (a child of /bin/true in a new user namespace, which
// Go starts with clone(CLONE_NEWUSER)), and status (the Seccomp and
// NoNewPrivs lines of /proc/self/status).
func seccompHelper(args []string) int {
	for _, a := range args {
		switch a {
		case "io_uring":
			var params [120]byte // struct io_uring_params
			fd, _, en := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
			if en == 0 {
				unix.Close(int(fd))
			}
			fmt.Println("io_uring_setup", errnoResult(en))
		case "clone-newuser":
			c := exec.Command("/bin/true")
			c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
			var en syscall.Errno
			if err := c.Run(); err != nil && !errors.As(err, &en) {
				fmt.Println("clone", err)
				continue
			}
			fmt.Println("clone", errnoResult(en))
		case "clone3-newuser":
			fmt.Println("clone3", clone3NewUser())
		case "status":
			b, _ := os.ReadFile("/proc/self/status")
			for _, l := range strings.Split(string(b), "\n") {
				if k, v, ok := strings.Cut(l, ":"); ok && (k == "Seccomp" || k == "NoNewPrivs") {
					fmt.Println(k, strings.TrimSpace(v))
				}
			}
		default:
			fmt.Fprintln(os.Stderr, "unknown syscall", a)
			return 2
		}
	}
	return 0
}

// clone3NewUser makes a child with a raw clone3(CLONE_NEWUSER), which the
// seccomp filter cannot see (its flags are behind a pointer), and says how
// the child ended: "killed" (SIGKILL before it ran: the collector's
// DenyUserNamespaces), "ran" (it ran in the new user namespace: exit 42),
// or clone3's errno.
func clone3NewUser() string {
	args := struct{ flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls uint64 }{
		flags: unix.CLONE_NEWUSER, exitSignal: uint64(syscall.SIGCHLD)}
	pid, _, en := syscall.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args), 0)
	if en != 0 {
		return errnoResult(en)
	}
	if pid == 0 { // the child: nothing but exit, not even the Go runtime
		syscall.RawSyscall(unix.SYS_EXIT_GROUP, 42, 0, 0)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(int(pid), &ws, 0, nil); err != nil {
		return "wait4: " + err.Error()
	}
	switch {
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		return "killed"
	case ws.Exited() && ws.ExitStatus() == 42:
		return "ran"
	}
	return fmt.Sprintf("status %v", ws)
}

func errnoResult(en syscall.Errno) string {
	if en == 0 {
		return "OK"
	}
	return unix.ErrnoName(en)
}

// agentUID returns the uid of sandtrail-agent (install.sh creates it), or
// skips the test.
func agentUID(t *testing.T) uint32 {
	t.Helper()
	u, err := user.Lookup("sandtrail-agent")
	if err != nil {
		t.Skipf("needs the user sandtrail-agent (install.sh creates it): %v", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	return uint32(uid)
}

// denials returns the syscalls of the process.denied events, checking that
// each is the agent's and carries EPERM.
func denials(t *testing.T, evs []*event.Event, uid uint32) map[string][]*event.Proc {
	t.Helper()
	out := map[string][]*event.Proc{}
	for _, ev := range kinds(evs, event.KindDenied) {
		p := ev.Proc
		// A clone3 returned its child's pid: the child was killed, no errno.
		errno := "EPERM"
		if p.Syscall == "clone3" {
			errno = ""
		}
		if ev.Source != event.SourceKernel || p.UID == nil || *p.UID != uid || p.Errno != errno || p.Pid == 0 {
			t.Errorf("process.denied %+v from %s, want the agent's (uid %d), with errno %q and a pid", *p, ev.Source, uid, errno)
		}
		out[p.Syscall] = append(out[p.Syscall], p)
	}
	return out
}

// TestRunSeccompIOURing: io_uring_setup by the
// unprivileged agent fails with EPERM under the session's seccomp filter
// (so nothing can open or read through io_uring past the record), and the
// refusal is recorded as process.denied naming io_uring_setup and the
// helper's pid. The helper runs filtered, with no_new_privs.
func TestRunSeccompIOURing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	uid := agentUID(t)
	r := e.run(append([]string{"--user", "sandtrail-agent", "--"}, helperCmd("seccomp", "io_uring", "status")...)...)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"io_uring_setup EPERM\n", "Seccomp 2\n", "NoNewPrivs 1\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("session output lacks %q:\n%s", want, r.stdout)
		}
	}
	evs := e.events(r.summary.SessionID)
	pid := helperPid(t, evs, "seccomp")
	d := denials(t, evs, uid)
	if got := d["io_uring_setup"]; len(got) != 1 || got[0].Pid != pid {
		t.Errorf("process.denied io_uring_setup = %+v, want one of the helper (pid %d); all: %v", got, pid, d)
	}
	e.verify()
}

// TestRunSeccompUserNamespaces: the agent cannot make a
// user namespace, so it cannot bind-mount /etc under its home and read
// passwd there: `unshare -Urm` (unshare(CLONE_NEWUSER|CLONE_NEWNS)) and a
// clone(CLONE_NEWUSER) fail with EPERM, and both are recorded as
// process.denied, unshare and clone; a raw clone3(CLONE_NEWUSER), whose
// flags the filter cannot read, gets a child that the kernel collector
// kills before it runs, recorded as process.denied clone3.
func TestRunSeccompUserNamespaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	uid := agentUID(t)
	script := `mkdir -p "$HOME/etc"
unshare -Urm sh -c 'mount --bind /etc "$HOME/etc" && cat "$HOME/etc/passwd"'
echo "unshare exit $?"
` + strings.Join(helperCmd("seccomp", "clone-newuser", "clone3-newuser"), " ") + "\n"
	r := e.run("--user", "sandtrail-agent", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "root:") || !strings.Contains(r.stdout, "unshare exit 1\n") {
		t.Errorf("unshare -Urm and the bind mount of /etc: output %q, want unshare to fail (exit 1) and no passwd", r.stdout)
	}
	if !strings.Contains(r.stderr, "Operation not permitted") {
		t.Errorf("unshare's error is not EPERM:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, "clone EPERM\n") {
		t.Errorf("clone(CLONE_NEWUSER): want EPERM in the output:\n%s", r.stdout)
	}
	evs := e.events(r.summary.SessionID)
	d := denials(t, evs, uid)
	if got := d["unshare"]; len(got) != 1 || got[0].Comm != "unshare" {
		t.Errorf("process.denied unshare = %+v, want one by unshare; all: %v", got, d)
	}
	if got := d["clone"]; len(got) != 1 || got[0].Pid != helperPid(t, evs, "seccomp") {
		t.Errorf("process.denied clone = %+v, want one by the helper; all: %v", got, d)
	}
	// clone3 passes the filter; the child it makes in a new user
	// namespace is killed by the kernel collector before it runs.
	if !strings.Contains(r.stdout, "clone3 killed\n") {
		t.Errorf("clone3(CLONE_NEWUSER): want its child killed before it ran (\"clone3 killed\") in the output:\n%s", r.stdout)
	}
	if got := d["clone3"]; len(got) != 1 || got[0].Pid != helperPid(t, evs, "seccomp") || got[0].Signal != int32(syscall.SIGKILL) {
		t.Errorf("process.denied clone3 = %+v, want one by the helper; all: %v", got, d)
	}
	e.verify()
}

// TestRunSeccompAllowIOURing: a policy that lets
// io_uring through (sandbox.seccomp.allow) relaxes the filter: the agent's
// io_uring_setup succeeds and nothing is denied.
func TestRunSeccompAllowIOURing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agentUID(t)
	pol := writePolicy(t, "sandbox:\n  seccomp:\n    allow: [io_uring]\n")
	r := e.run(append([]string{"--policy", pol, "--user", "sandtrail-agent", "--"}, helperCmd("seccomp", "io_uring", "status")...)...)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"io_uring_setup OK\n", "Seccomp 2\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("session output lacks %q:\n%s", want, r.stdout)
		}
	}
	if d := kinds(e.events(r.summary.SessionID), event.KindDenied); len(d) != 0 {
		t.Errorf("process.denied events = %d, want none: %+v", len(d), d[0].Proc)
	}
}
