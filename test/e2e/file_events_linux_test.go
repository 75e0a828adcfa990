package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/record/event"
)

// agentRun runs sh -c script in a session as the default agent user
// (sandtrail-agent), with the embedded default policy, and returns the
// result with the session's events. The script's first line of output
// must be its $HOME.
func agentRun(t *testing.T, e *env, script string) (result, string, []*event.Event) {
	t.Helper()
	r := e.run("--", "sh", "-c", `echo "$HOME"; `+script)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	home, _, _ := strings.Cut(r.stdout, "\n")
	if !filepath.IsAbs(home) {
		t.Fatalf("session output %q: want $HOME first", r.stdout)
	}
	return r, home, e.events(r.summary.SessionID)
}

// fileEvent returns the first event of kind whose file path is p.
func fileEvent(evs []*event.Event, kind, p string) *event.Event {
	for _, ev := range kinds(evs, kind) {
		if ev.File != nil && ev.File.Path == p {
			return ev
		}
	}
	return nil
}

// TestRunReadsCreatedInSession: the agent creates
// ~/.ssh, ~/.aws, ~/.config/gcloud and ~/.docker in its new home, writes a
// key, credentials and configs there and cats them as its last act; each
// cat is a file.read with the absolute path, although none of the
// directories existed when the session's read rules were set, and the
// session's rules are removed as soon as it ends, maybe before the
// collector reads the records. A read beside a nested rule
// (~/.docker/other, ~/.config/other) is not recorded. It runs four
// sessions: before the kernel decided these reads at the open, a session
// lost them when its end came before the collector's next poll, about
// every other time.
func TestRunReadsCreatedInSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const script = `echo "$HOME"; mkdir -p ~/.ssh ~/.aws ~/.config/gcloud ~/.docker && cd ~ &&
		files=".ssh/id_rsa .aws/credentials .config/gcloud/credentials.db .docker/config.json .docker/other .config/other" &&
		for f in $files; do echo secret >$f || exit 1; done && exec cat $files >/dev/null`
	for range 4 {
		r := e.run("--", "sh", "-c", script)
		if r.code != 0 {
			t.Fatalf("sandtrail run: exit %d\n%s", r.code, r.stderr)
		}
		home, _, _ := strings.Cut(r.stdout, "\n")
		checkHomeReads(t, home, e.events(r.summary.SessionID))
	}
	e.verify()
}

// checkHomeReads checks the reads of TestRunReadsCreatedInSession.
func checkHomeReads(t *testing.T, home string, evs []*event.Event) {
	t.Helper()
	for _, rel := range []string{".ssh/id_rsa", ".aws/credentials", ".config/gcloud/credentials.db", ".docker/config.json"} {
		p := filepath.Join(home, rel)
		ev := fileEvent(evs, event.KindFileRead, p)
		if ev == nil {
			t.Errorf("no file.read of %s in the session", p)
			continue
		}
		if ev.Proc == nil || ev.Proc.Comm != "cat" || ev.File.Result == nil {
			t.Errorf("file.read of %s = %+v by %+v, want a successful read by cat", p, ev.File, ev.Proc)
		}
	}
	for _, rel := range []string{".docker/other", ".config/other"} {
		if p := filepath.Join(home, rel); fileEvent(evs, event.KindFileRead, p) != nil {
			t.Errorf("file.read of %s recorded, want only the policy's sensitive paths", p)
		}
	}
}

// TestRunMkdirAndLinks: the agent's mkdir (relative and
// absolute) is a file.create with dir set, and a refused one under /usr/bin
// is recorded with EACCES; ln -s, ln and their refused forms are file.link
// with the link's path and its target: a symbolic link to /etc/shadow, a
// relative symbolic link (its target kept as given), a hard link, and a
// hard link to /etc/shadow, which is refused: everything the agent can
// write is on the session's own filesystem (EXDEV; on a shared one,
// protected_hardlinks would refuse it with EPERM).
func TestRunMkdirAndLinks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, home, evs := agentRun(t, e, `cd ~ && mkdir d && mkdir "$HOME/d/e" && echo x >d/f &&
		! mkdir /usr/bin/sandtrail-e2e 2>/dev/null &&
		ln -s /etc/shadow s && ln -s ../x d/rel && ln d/f hard && ! ln /etc/shadow h 2>/dev/null`)
	in := func(rel string) string { return filepath.Join(home, rel) }
	for _, c := range []struct {
		path, errno string
	}{
		{in("d"), ""}, {in("d/e"), ""}, {"/usr/bin/sandtrail-e2e", "EACCES"},
	} {
		ev := fileEvent(evs, event.KindFileCreate, c.path)
		if ev == nil {
			t.Errorf("no file.create of %s in session %s", c.path, r.summary.SessionID)
			continue
		}
		if f := ev.File; !f.Dir || f.Errno != c.errno || (c.errno == "") != (f.Result != nil) || f.Flags&0o777 == 0 {
			t.Errorf("file.create of %s = %+v, want dir, a mode in flags and errno %q", c.path, *f, c.errno)
		}
	}
	if ev := fileEvent(evs, event.KindFileCreate, in("d/f")); ev == nil || ev.File.Dir {
		t.Errorf("file.create of %s = %+v, want one that is not a directory", in("d/f"), ev)
	}
	for _, c := range []struct {
		path, target string
		symlink      bool
		errno        string
	}{
		{in("s"), "/etc/shadow", true, ""},
		{in("d/rel"), "../x", true, ""},
		{in("hard"), in("d/f"), false, ""},
		{in("h"), "/etc/shadow", false, "EXDEV"},
	} {
		ev := fileEvent(evs, event.KindFileLink, c.path)
		if ev == nil {
			t.Errorf("no file.link of %s in session %s", c.path, r.summary.SessionID)
			continue
		}
		f := ev.File
		if f.Op != "link" || f.Target != c.target || f.Symlink != c.symlink || f.Errno != c.errno || (c.errno == "") != (f.Result != nil) {
			t.Errorf("file.link of %s = %+v, want target %q, symlink %v, errno %q", c.path, *f, c.target, c.symlink, c.errno)
		}
		if ev.Proc == nil || ev.Proc.Comm != "ln" || ev.Source != event.SourceKernel {
			t.Errorf("file.link of %s by %+v from %s, want ln, kernel", c.path, ev.Proc, ev.Source)
		}
	}
	e.verify()
}

// ptraceHelper attaches to a child of its own (and detaches), seizes
// another, starts a third that asks to be traced (PTRACE_TRACEME, by
// SysProcAttr.Ptrace), and fails to attach to pid 1. It prints "attach
// PID", "seize PID" and "traceme PID", then "self PID", and kills its
// children by pid.
func ptraceHelper([]string) int {
	runtime.LockOSThread() // the tracer is this thread
	fail := func(what string, err error) int {
		fmt.Fprintln(os.Stderr, what+":", err)
		return 1
	}
	var kids []*exec.Cmd
	defer func() {
		for _, k := range kids {
			_ = k.Process.Kill()
			_ = k.Wait()
		}
	}()
	start := func() (int, error) {
		k := exec.Command("/bin/sleep", "30")
		if err := k.Start(); err != nil {
			return 0, err
		}
		kids = append(kids, k)
		return k.Process.Pid, nil
	}
	a, err := start()
	if err != nil {
		return fail("starting a child", err)
	}
	if err := syscall.PtraceAttach(a); err != nil {
		return fail("attaching", err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(a, &ws, 0, nil); err != nil {
		return fail("waiting for the attached child", err)
	}
	if err := syscall.PtraceDetach(a); err != nil {
		return fail("detaching", err)
	}
	s, err := start()
	if err != nil {
		return fail("starting a child", err)
	}
	if err := unix.PtraceSeize(s); err != nil {
		return fail("seizing", err)
	}
	tm := exec.Command("/bin/true")
	tm.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := tm.Start(); err != nil {
		return fail("starting a traced child", err)
	}
	// It stops at its exec; let it go.
	if _, err := syscall.Wait4(tm.Process.Pid, &ws, 0, nil); err != nil {
		return fail("waiting for the traced child", err)
	}
	if err := syscall.PtraceDetach(tm.Process.Pid); err != nil {
		return fail("detaching the traced child", err)
	}
	_ = tm.Wait()
	if err := syscall.PtraceAttach(1); !errors.Is(err, syscall.EPERM) {
		return fail("attaching to pid 1", fmt.Errorf("%v, want EPERM", err))
	}
	fmt.Printf("attach %d\nseize %d\ntraceme %d\nself %d\n", a, s, tm.Process.Pid, os.Getpid())
	return 0
}

// TestRunPtrace: the agent's PTRACE_ATTACH and
// PTRACE_SEIZE of its children, a child's PTRACE_TRACEME and a refused
// attach to pid 1 are process.ptrace events with the request and the
// target pid (for traceme, the parent that becomes the tracer), and EPERM
// for the refused one.
func TestRunPtrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run(append([]string{"--"}, helperCmd("ptrace")...)...)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\n%s", r.code, r.stderr)
	}
	pids := map[string]int32{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var what string
		var pid int32
		if _, err := fmt.Sscanf(line, "%s %d", &what, &pid); err == nil {
			pids[what] = pid
		}
	}
	self := pids["self"]
	if self == 0 || len(pids) != 4 {
		t.Fatalf("helper output %q: want attach, seize, traceme and self pids", r.stdout)
	}
	evs := kinds(e.events(r.summary.SessionID), event.KindPtrace)
	for _, c := range []struct {
		request   string
		pid, tpid int32
		errno     string
	}{
		{"attach", self, pids["attach"], ""},
		{"seize", self, pids["seize"], ""},
		{"traceme", pids["traceme"], self, ""},
		{"attach", self, 1, "EPERM"},
	} {
		var got *event.Proc
		for _, ev := range evs {
			if p := ev.Proc; p.Pid == c.pid && p.Ptrace != nil && p.Ptrace.Request == c.request && p.Ptrace.TargetPid == c.tpid {
				got = p
			}
		}
		if got == nil {
			t.Errorf("no process.ptrace %s of %d by pid %d in %d ptrace events", c.request, c.tpid, c.pid, len(evs))
			continue
		}
		if got.Errno != c.errno || got.UID == nil || *got.UID == 0 {
			t.Errorf("process.ptrace %s of %d = %+v, want errno %q and the agent's uid", c.request, c.tpid, *got, c.errno)
		}
	}
	e.verify()
}
