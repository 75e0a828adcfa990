package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// intrudeHelper is "intrude PID WORKDIR": from one session, it tries to
// reach the session whose main process is PID and whose workdir is
// WORKDIR, and prints one line "what=RESULT" per try, RESULT being OK or
// the errno's name.
func intrudeHelper(args []string) int {
	if len(args) != 2 {
		return 2
	}
	pid, _ := strconv.Atoi(args[0])
	wd := args[1]
	proc := fmt.Sprintf("/proc/%d", pid)
	runtime.LockOSThread() // the tracer is this thread
	try := func(what string, err error) {
		res := "OK"
		var en syscall.Errno
		switch {
		case errors.As(err, &en):
			res = unix.ErrnoName(en)
		case err != nil:
			res = "error"
		}
		fmt.Printf("%s=%s\n", what, res)
	}
	read := func(p string) error { _, err := os.ReadFile(p); return err }
	write := func(p string) error { return os.WriteFile(p, []byte("intruder"), 0o644) }
	try("read_workdir", read(filepath.Join(wd, "secret.txt")))
	try("write_workdir", write(filepath.Join(wd, "intruder.txt")))
	try("read_root", read(filepath.Join(proc, "root", wd, "secret.txt")))
	try("write_root", write(filepath.Join(proc, "root", wd, "intruder.txt")))
	try("read_cwd", read(filepath.Join(proc, "cwd", "secret.txt")))
	try("write_cwd", write(filepath.Join(proc, "cwd", "intruder.txt")))
	try("read_environ", read(filepath.Join(proc, "environ")))
	try("read_mem", read(filepath.Join(proc, "mem")))
	_, err := os.ReadDir(filepath.Join(proc, "fd"))
	try("list_fd", err)
	ptrace := func() error {
		if err := syscall.PtraceAttach(pid); err != nil {
			return err
		}
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
		return syscall.PtraceDetach(pid)
	}
	try("ptrace", ptrace())
	try("kill", syscall.Kill(pid, syscall.SIGKILL))
	return 0
}

// TestSessionIsolation: two concurrent sessions of a daemon, each as the
// default agent user, run under uids of their own. From session A, B's
// workdir, /proc/<B's pid>/root, cwd, environ, mem and fd, ptrace and kill
// all fail, and B's record is intact: it ends normally, with its file.
func TestSessionIsolation(t *testing.T) {
	t.Parallel()
	agent, err := user.Lookup("sandtrail-agent")
	if err != nil {
		t.Skipf("needs the user sandtrail-agent (install.sh creates it): %v", err)
	}
	e := newEnv(t)
	stop := startPlainDaemon(t, e)
	defer stop()

	bDone := e.startRun("--env", "SANDTRAIL_E2E_SECRET=b-env-secret", "--", "sh", "-c",
		`echo b-secret > secret.txt; while [ ! -e release ]; do sleep 0.05; done; cat secret.txt; id -u`)
	defer e.release("release")
	var bID string
	var bPid int
	waitFor(t, "session B's shell", func() bool {
		dirs, _ := filepath.Glob(filepath.Join(e.data, "sessions", "*", "work", "secret.txt"))
		if len(dirs) != 1 {
			return false
		}
		bID = filepath.Base(filepath.Dir(filepath.Dir(dirs[0])))
		bPid = sessionProcess(bID, "sh")
		return bPid > 0
	})
	bWork := filepath.Join(e.data, "sessions", bID, "work")

	a := e.run(append([]string{"--", "sh", "-c", `id -un; id -u; exec "$@"`, "sh"}, helperCmd("intrude", strconv.Itoa(bPid), bWork)...)...)
	if a.code != 0 {
		t.Fatalf("session A: exit %d\n%s", a.code, a.stderr)
	}
	t.Logf("session A:\n%s", a.stdout)
	lines := strings.Split(strings.TrimSpace(a.stdout), "\n")
	if len(lines) < 3 || lines[0] != "sandtrail-agent" {
		t.Fatalf("session A printed %q, want its user name sandtrail-agent, its uid and the tries", a.stdout)
	}
	aUID := lines[1]
	for _, l := range lines[2:] {
		if strings.HasSuffix(l, "=OK") {
			t.Errorf("from session A: %s, want it refused", l)
		}
	}
	if len(lines) != 2+11 {
		t.Errorf("session A printed %d tries, want 11:\n%s", len(lines)-2, a.stdout)
	}
	if _, err := os.Stat(filepath.Join(bWork, "intruder.txt")); !os.IsNotExist(err) {
		t.Errorf("B's workdir holds A's intruder.txt: Stat() = %v", err)
	}
	if sessionProcess(bID, "sh") != bPid {
		t.Fatalf("B's shell %d is gone after A's tries", bPid)
	}

	e.release("release")
	var b ran
	select {
	case b = <-bDone:
	case <-time.After(waitBound):
		t.Fatal("session B did not end after its release")
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	bOut := strings.Split(strings.TrimSpace(b.r.stdout), "\n")
	if b.r.code != 0 || len(bOut) != 2 || bOut[0] != "b-secret" {
		t.Errorf("session B: exit %d, stdout %q, want 0 and its secret intact", b.r.code, b.r.stdout)
	}
	bUID := bOut[len(bOut)-1]
	if aUID == bUID || aUID == agent.Uid || bUID == agent.Uid {
		t.Errorf("uids: A %s, B %s, sandtrail-agent %s: want each session its own", aUID, bUID, agent.Uid)
	}
	for _, u := range []string{aUID, bUID} {
		if n, err := strconv.ParseUint(u, 10, 32); err != nil || n < 0x5a000000 || n >= 0x5a000000+65536 {
			t.Errorf("session uid %s, want one of 0x5a000000+n", u)
		}
	}
	evs := e.events(b.r.summary.SessionID)
	if term := terminate(t, evs); term.Reason != "normal" || term.ExitStatus == nil || *term.ExitStatus != 0 {
		t.Errorf("B's session.terminate = %+v, want normal, 0", term)
	}
	for _, ev := range evs {
		if ev.Proc != nil && ev.Proc.Signal != 0 {
			t.Errorf("B's record has a process killed by signal %d: %+v", ev.Proc.Signal, ev.Proc)
		}
	}
	stop() // the daemon signs its last entries as it stops
	e.verify()
}

// startPlainDaemon starts `sandtrail daemon` for e and returns the function
// that stops it (SIGTERM, then waits).
func startPlainDaemon(t *testing.T, e *env) func() {
	t.Helper()
	d := e.cmd("daemon")
	var log strings.Builder
	var mu sync.Mutex
	d.Stdout = writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return log.Write(b) })
	d.Stderr = d.Stdout
	if err := e.start(d); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Wait() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = d.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-done:
				if err != nil {
					mu.Lock()
					t.Errorf("daemon: %v\n%s", err, log.String())
					mu.Unlock()
				}
			case <-time.After(60 * time.Second):
				_ = d.Process.Kill()
				t.Errorf("daemon did not stop on SIGTERM")
			}
		})
	}
	ctl := filepath.Join(filepath.Dir(e.sock), "control.sock")
	waitFor(t, "the control socket", func() bool { _, err := os.Stat(ctl); return err == nil })
	t.Cleanup(stop)
	return stop
}
