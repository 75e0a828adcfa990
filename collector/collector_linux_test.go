//go:build 386 || amd64 || arm64

package collector

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
)

const nobody = 65534

func findExec(evs []*event.Event, exe string) []*event.Event {
	var out []*event.Event
	for _, ev := range evs {
		if ev.Kind == event.KindExec && ev.Proc.Exe == exe {
			out = append(out, ev)
		}
	}
	return out
}

func findPid(evs []*event.Event, kind string, pid int32) *event.Event {
	for _, ev := range evs {
		if ev.Kind == kind && ev.Proc.Pid == pid {
			return ev
		}
	}
	return nil
}

func TestExecForkExit(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	r := startRecorder(t, false)
	const sid = "sess-exec"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	before := time.Now()
	cmd := exec.Command("/bin/sh", "-c", `cd /tmp && /bin/echo a "b c" >/dev/null; exit 7`)
	cmd.Dir = "/"
	cmd.SysProcAttr = cg.SysProcAttr(t, nobody)
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("sh exit = %v, want exit status 7", err)
	}
	after := time.Now()
	evs := r.stop(t)
	if len(evs) == 0 || evs[0].Kind != event.KindCapabilities || evs[0].Kernel == nil {
		t.Fatalf("the first event is not collector.capabilities: %v", kinds(evs))
	}
	// Every event but collector.capabilities is a ring-buffer record.
	if s := r.c.Stats(); s.Received < uint64(len(evs)-1) || s.KernelDrops != 0 || s.QueueDrops != 0 || s.DecodeErrors != 0 || s.BPFMisses != 0 {
		t.Errorf("Stats() = %+v, want at least %d received and nothing lost", s, len(evs)-1)
	}
	mine := slices.DeleteFunc(slices.Clone(evs), func(ev *event.Event) bool { return ev.SessionID != sid })

	shPid := int32(cmd.Process.Pid)
	sh := findExec(mine, "/bin/sh")
	if len(sh) != 1 {
		t.Fatalf("exec events of /bin/sh = %d, want 1 (events: %v)", len(sh), kinds(mine))
	}
	if sh[0].Proc.Pid != shPid {
		t.Errorf("sh exec pid = %d, want %d", sh[0].Proc.Pid, shPid)
	}
	if want := []string{"/bin/sh", "-c", `cd /tmp && /bin/echo a "b c" >/dev/null; exit 7`}; !slices.Equal(sh[0].Proc.Argv, want) {
		t.Errorf("sh argv = %q, want %q", sh[0].Proc.Argv, want)
	}
	if sh[0].Proc.Cwd != "/" {
		t.Errorf("sh cwd = %q, want /", sh[0].Proc.Cwd)
	}
	echo := findExec(mine, "/bin/echo")
	if len(echo) != 1 {
		t.Fatalf("exec events of /bin/echo = %d, want 1 (events: %v)", len(echo), kinds(mine))
	}
	p := echo[0].Proc
	if b, err := event.Marshal(echo[0]); err == nil {
		t.Logf("echo exec: %s", b)
	}
	if want := []string{"/bin/echo", "a", "b c"}; !slices.Equal(p.Argv, want) {
		t.Errorf("echo argv = %q, want %q", p.Argv, want)
	}
	if p.ArgvTruncated {
		t.Errorf("echo argv_truncated = true, want false")
	}
	if p.Cwd != "/tmp" {
		t.Errorf("echo cwd = %q, want /tmp", p.Cwd)
	}
	if p.UID == nil || *p.UID != nobody || p.EUID == nil || *p.EUID != nobody {
		t.Errorf("echo uid, euid = %v, %v, want %d", deref(p.UID), deref(p.EUID), nobody)
	}
	if p.PPid != shPid {
		t.Errorf("echo ppid = %d, want sh's pid %d", p.PPid, shPid)
	}
	if p.CgroupID != cg.ID {
		t.Errorf("echo cgroup_id = %d, want %d", p.CgroupID, cg.ID)
	}
	if p.Comm != "echo" {
		t.Errorf("echo comm = %q, want echo", p.Comm)
	}
	ts := echo[0].TS
	if ts.Before(before.Add(-time.Millisecond)) || ts.After(after.Add(time.Millisecond)) {
		t.Errorf("echo ts = %v, want between %v and %v", ts, before, after)
	}
	if p.StartTS.After(ts) || p.StartTS.Before(before.Add(-time.Millisecond)) {
		t.Errorf("echo start_ts = %v, want between %v and the exec at %v", p.StartTS, before, ts)
	}
	if echo[0].Source != event.SourceKernel {
		t.Errorf("echo source = %q, want kernel", echo[0].Source)
	}

	// The fork of echo by sh.
	fork := findPid(mine, event.KindFork, p.Pid)
	if fork == nil || fork.Proc.PPid != shPid {
		t.Errorf("fork of echo = %+v, want one with ppid %d", fork, shPid)
	}
	// Exits: echo 0, sh 7.
	for _, c := range []struct {
		name string
		pid  int32
		code int32
	}{
		{"echo", p.Pid, 0},
		{"sh", shPid, 7},
	} {
		ex := findPid(mine, event.KindExit, c.pid)
		if ex == nil {
			t.Errorf("exit of %s (pid %d): none, want one", c.name, c.pid)
			continue
		}
		if ex.Proc.ExitCode == nil || *ex.Proc.ExitCode != c.code || ex.Proc.Signal != 0 {
			t.Errorf("exit of %s = code %v signal %d, want code %d", c.name, deref32(ex.Proc.ExitCode), ex.Proc.Signal, c.code)
		}
	}
}

func deref(p *uint32) any {
	if p == nil {
		return nil
	}
	return *p
}

func deref32(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}

func kinds(evs []*event.Event) []string {
	var out []string
	for _, ev := range evs {
		s := ev.Kind
		if ev.Proc != nil {
			s += ":" + ev.Proc.Exe + ":" + ev.Proc.Comm
		}
		out = append(out, s)
	}
	return out
}

func TestArgvTruncated(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	r := startRecorder(t, false)
	const sid = "sess-argv"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	// 100 KiB of arguments of varied lengths, including empty ones and ones
	// with spaces, and every byte value but NUL.
	args := []string{"/bin/true", "", "with space", " ", ""}
	total := 0
	for _, a := range args {
		total += len(a) + 1
	}
	for i := 0; total < 100<<10; i++ {
		var b strings.Builder
		for j := range 1 + (i*37)%700 {
			b.WriteByte(byte(1 + (i+j)%255))
		}
		if i%9 == 0 {
			b.Reset()
		}
		args = append(args, b.String())
		total += b.Len() + 1
	}
	cmd := &exec.Cmd{Path: "/bin/true", Args: args, SysProcAttr: cg.SysProcAttr(t, nobody)}
	if err := cmd.Run(); err != nil {
		t.Fatalf("running /bin/true with %d bytes of argv: %v", total, err)
	}
	evs := r.stop(t)
	got := findExec(inSession(evs, sid, event.KindExec), "/bin/true")
	if len(got) != 1 {
		t.Fatalf("exec events of /bin/true = %d, want 1", len(got))
	}
	p := got[0].Proc
	if !p.ArgvTruncated {
		t.Errorf("argv_truncated = false, want true")
	}
	full := strings.Join(args, "\x00") + "\x00"
	want := full[:argvMax]
	gotJoined := strings.Join(p.Argv, "\x00")
	if !strings.HasSuffix(want, "\x00") {
		// The cut fell inside an argument: no terminating NUL.
	} else {
		gotJoined += "\x00"
	}
	if gotJoined != want {
		i := 0
		for i < len(gotJoined) && i < len(want) && gotJoined[i] == want[i] {
			i++
		}
		t.Errorf("argv = %d bytes differing from the first %d bytes of the real argv at byte %d", len(gotJoined), argvMax, i)
	}
	if len(p.Argv) < 5 || !slices.Equal(p.Argv[:5], args[:5]) {
		t.Errorf("argv[:5] = %q, want %q", p.Argv[:min(5, len(p.Argv))], args[:5])
	}
}

func TestExecFailed(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	dir := t.TempDir()
	nonExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(nonExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	r := startRecorder(t, false)
	const sid = "sess-fail"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	for _, path := range []string{nonExec, missing} {
		cmd := &exec.Cmd{Path: path, Args: []string{path}, SysProcAttr: cg.SysProcAttr(t, -1)}
		if err := cmd.Run(); err == nil {
			t.Fatalf("exec of %s succeeded, want an error", path)
		}
	}
	// execveat, whose filename is its second argument.
	missingAt := filepath.Join(dir, "missing-at")
	if err := helperCmd(t, cg, "execveat", missingAt).Run(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	evs := r.stop(t)
	failed := inSession(evs, sid, event.KindExecFailed)
	for _, c := range []struct {
		name, path, errno string
	}{
		{"not executable", nonExec, "EACCES"},
		{"missing", missing, "ENOENT"},
		{"execveat missing", missingAt, "ENOENT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var hit *event.Event
			for _, ev := range failed {
				if ev.Proc.Exe == c.path {
					hit = ev
				}
			}
			if hit == nil {
				t.Fatalf("exec_failed of %s: none in %v", c.path, kinds(failed))
			}
			if hit.Proc.Errno != c.errno {
				t.Errorf("exec_failed(%s).errno = %q, want %q", c.path, hit.Proc.Errno, c.errno)
			}
			if hit.Proc.CgroupID != cg.ID {
				t.Errorf("exec_failed(%s).cgroup_id = %d, want %d", c.path, hit.Proc.CgroupID, cg.ID)
			}
		})
	}
	// The helper's own exec is recorded; none of the failed ones is.
	execs := inSession(evs, sid, event.KindExec)
	for _, p := range []string{nonExec, missing, missingAt} {
		if got := findExec(execs, p); len(got) != 0 {
			t.Errorf("exec events of %s = %d, want 0", p, len(got))
		}
	}
}

func init() {
	// helperExecveat calls execveat(AT_FDCWD, args[0], ...), which must
	// fail, and exits 0 when it does.
	helperModes["execveat"] = func(args []string) int {
		path, err := unix.BytePtrFromString(args[0])
		if err != nil {
			return 1
		}
		argv := []*byte{path, nil}
		envv := []*byte{nil}
		cwd := unix.AT_FDCWD
		_, _, errno := unix.Syscall6(unix.SYS_EXECVEAT, uintptr(cwd), uintptr(unsafe.Pointer(path)),
			uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])), 0, 0)
		if errno == 0 {
			return 1
		}
		return 0
	}
}

func TestPipes(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	r := startRecorder(t, false)
	const sid = "sess-pipe"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	cmd := exec.Command("/bin/sh", "-c", "/bin/echo hi | /bin/cat")
	cmd.SysProcAttr = cg.SysProcAttr(t, nobody)
	out, err := cmd.Output()
	if err != nil || string(out) != "hi\n" {
		t.Fatalf("sh = %q, %v, want hi", out, err)
	}
	evs := inSession(r.stop(t), sid, event.KindExec)
	echo, cat := findExec(evs, "/bin/echo"), findExec(evs, "/bin/cat")
	if len(echo) != 1 || len(cat) != 1 {
		t.Fatalf("exec events of echo, cat = %d, %d, want 1, 1", len(echo), len(cat))
	}
	if echo[0].Proc.StdoutPipe == 0 || echo[0].Proc.StdoutPipe != cat[0].Proc.StdinPipe {
		t.Errorf("echo stdout_pipe = %d, cat stdin_pipe = %d, want equal and non-zero", echo[0].Proc.StdoutPipe, cat[0].Proc.StdinPipe)
	}
	// cat's stdout is the pipe Output reads from, a different pipe.
	if cat[0].Proc.StdoutPipe == 0 || cat[0].Proc.StdoutPipe == cat[0].Proc.StdinPipe {
		t.Errorf("cat stdout_pipe = %d, stdin_pipe = %d, want two different pipes", cat[0].Proc.StdoutPipe, cat[0].Proc.StdinPipe)
	}
	if echo[0].Proc.StdinPipe != 0 {
		t.Errorf("echo stdin_pipe = %d, want 0 (stdin is /dev/null)", echo[0].Proc.StdinPipe)
	}
}

func TestUnwatchedNotCaptured(t *testing.T) {
	requireKernel(t)
	watched, other := cgrouptest.New(t), cgrouptest.New(t)
	r := startRecorder(t, false)
	if err := r.c.Watch(watched.ID, "sess-watched"); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	marker := "sandtrail-unwatched-marker"
	cmd := exec.Command("/bin/sh", "-c", "/bin/echo "+marker+" >/dev/null")
	cmd.SysProcAttr = other.SysProcAttr(t, nobody)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	// And one in the watched cgroup, so that the test sees the collector
	// working.
	cmd = exec.Command("/bin/true", "watched")
	cmd.SysProcAttr = watched.SysProcAttr(t, nobody)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	evs := r.stop(t)
	for _, ev := range evs {
		if ev.Proc != nil && (ev.Proc.CgroupID == other.ID || slices.Contains(ev.Proc.Argv, marker)) {
			t.Errorf("captured %s of pid %d in the unwatched cgroup", ev.Kind, ev.Proc.Pid)
		}
	}
	if n := len(findExec(inSession(evs, "sess-watched", event.KindExec), "/bin/true")); n != 1 {
		t.Errorf("exec events in the watched cgroup = %d, want 1", n)
	}
}

func TestNestedCgroup(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	inner := cg.Child(t, "inner")
	r := startRecorder(t, false)
	if err := r.c.Watch(cg.ID, "sess-nested"); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	cmd := exec.Command("/bin/true", "nested")
	cmd.SysProcAttr = inner.SysProcAttr(t, nobody)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	got := findExec(inSession(r.stop(t), "sess-nested", event.KindExec), "/bin/true")
	if len(got) != 1 {
		t.Fatalf("exec events in the nested cgroup = %d, want 1", len(got))
	}
	if got[0].Proc.CgroupID != inner.ID {
		t.Errorf("cgroup_id = %d, want the inner cgroup's %d (the watched one is %d)", got[0].Proc.CgroupID, inner.ID, cg.ID)
	}
}

const argvMax = int(processLimitsARGV_MAX)
