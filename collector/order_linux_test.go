//go:build 386 || amd64 || arm64

package collector

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
)

func init() { helperModes["create-files"] = helperCreateFiles }

// helperCreateFiles creates args[1] files in the directory args[0].
func helperCreateFiles(args []string) int {
	n, _ := strconv.Atoi(args[1])
	for i := range n {
		f, err := os.Create(filepath.Join(args[0], fmt.Sprintf("f%d", i)))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		f.Close()
	}
	return 0
}

// TestCauseBeforeEffect runs a fresh copy of the test binary (a file the
// hash cache has never seen, tens of MiB to hash) that creates files as
// soon as it starts: its exec must come before every one of its file
// events, whether its hash is done in time or follows as process.exe_hash.
func TestCauseBeforeEffect(t *testing.T) {
	requireKernel(t)
	dir, err := os.MkdirTemp("", "sandtrail-order-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cg := cgrouptest.New(t)
	r := startRecorder(t, false)
	const sid = "sess-order"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatal(err)
	}
	const runs = 3
	var pids []int32
	for i := range runs {
		bin := filepath.Join(dir, fmt.Sprintf("helper%d", i))
		copyFile(t, self, bin)
		out := filepath.Join(dir, fmt.Sprintf("out%d", i))
		if err := os.Mkdir(out, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(out, 0o777); err != nil { // past the umask
			t.Fatal(err)
		}
		cmd := exec.Command(bin, out, "20")
		cmd.Env = append(os.Environ(), helperEnv+"=create-files")
		cmd.SysProcAttr = cg.SysProcAttr(t, nobody)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", bin, err, b)
		}
		pids = append(pids, int32(cmd.Process.Pid))
	}
	evs := r.stop(t)
	for _, pid := range pids {
		execAt, creates, hashAt := -1, 0, -1
		for i, ev := range evs {
			if ev.SessionID != sid || ev.Proc == nil || ev.Proc.Pid != pid {
				continue
			}
			switch ev.Kind {
			case event.KindExec:
				execAt = i
				if ev.Proc.ExeSHA256 == "" && ev.Proc.ExeSHA256Missing != HashPending {
					t.Errorf("pid %d: exec without a hash: %q", pid, ev.Proc.ExeSHA256Missing)
				}
			case event.KindExeHash:
				hashAt = i
				if ev.Proc.ExeSHA256 == "" {
					t.Errorf("pid %d: process.exe_hash without a hash: %q", pid, ev.Proc.ExeSHA256Missing)
				}
			case event.KindFileCreate:
				creates++
				if execAt < 0 {
					t.Errorf("pid %d: file.create (event %d) before its exec", pid, i)
				}
			}
		}
		if execAt < 0 || creates == 0 {
			t.Fatalf("pid %d: exec at %d, %d file.create: want both (events: %v)", pid, execAt, creates, kinds(evs))
		}
		if hashAt >= 0 && hashAt < execAt {
			t.Errorf("pid %d: process.exe_hash (event %d) before its exec (event %d)", pid, hashAt, execAt)
		}
	}
}

// copyFile copies src to a new executable file dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFilelessExitedHash runs a memfd copy of /usr/bin/id that exits at
// once, before the collector reads its exec (the reader is held back): its
// /proc/PID/exe is gone, and the hash must come from the memfd that the
// test still holds open.
func TestFilelessExitedHash(t *testing.T) {
	requireKernel(t)
	bin, err := os.ReadFile("/usr/bin/id")
	if err != nil {
		t.Skip("no /usr/bin/id")
	}
	want := fmt.Sprintf("%x", sha256.Sum256(bin))
	mfd, err := unix.MemfdCreate("sandtrail-id", 0)
	if err != nil {
		t.Fatal(err)
	}
	memfd := os.NewFile(uintptr(mfd), "memfd")
	defer memfd.Close()
	if _, err := memfd.Write(bin); err != nil {
		t.Fatal(err)
	}
	cg := cgrouptest.New(t)
	gate := make(chan struct{})
	r := startRecorder(t, false, withReaderGate(gate))
	const sid = "sess-fileless"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: "/proc/self/fd/3", Args: []string{"id"}, ExtraFiles: []*os.File{memfd},
		SysProcAttr: cg.SysProcAttr(t, nobody)}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("memfd id: %v\n%s", err, out)
	}
	pid := int32(cmd.Process.Pid)
	close(gate) // the process has exited and been reaped
	evs := r.stop(t)
	ex := findPid(evs, event.KindExec, pid)
	if ex == nil {
		t.Fatalf("no exec of pid %d: %v", pid, kinds(evs))
	}
	if !ex.Proc.Fileless {
		t.Errorf("exec of a memfd: fileless = false")
	}
	got, missing := ex.Proc.ExeSHA256, ex.Proc.ExeSHA256Missing
	if h := findPid(evs, event.KindExeHash, pid); h != nil {
		got, missing = h.Proc.ExeSHA256, h.Proc.ExeSHA256Missing
	}
	if got != want {
		t.Errorf("the memfd exec's sha256 = %q (missing: %q), want /usr/bin/id's %s", got, missing, want)
	}
}

// TestLateHash: an exec whose hash is not done within hashWait goes
// without it (exe_sha256_missing pending), and the hash follows as
// process.exe_hash, after the exec.
func TestLateHash(t *testing.T) {
	requireKernel(t)
	old := hashWait
	hashWait = 0
	t.Cleanup(func() { hashWait = old })
	dir, err := os.MkdirTemp("", "sandtrail-late-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "helper")
	copyFile(t, self, bin) // tens of MiB the cache has never seen
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	cg := cgrouptest.New(t)
	r := startRecorder(t, false)
	const sid = "sess-late"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, out, "1")
	cmd.Env = append(os.Environ(), helperEnv+"=create-files")
	cmd.SysProcAttr = cg.SysProcAttr(t, nobody)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, b)
	}
	pid := int32(cmd.Process.Pid)
	evs := r.stop(t)
	execAt, hashAt := -1, -1
	for i, ev := range evs {
		if ev.Proc == nil || ev.Proc.Pid != pid {
			continue
		}
		switch ev.Kind {
		case event.KindExec:
			execAt = i
			if ev.Proc.ExeSHA256 != "" || ev.Proc.ExeSHA256Missing != HashPending {
				t.Errorf("exec: sha256 %q, missing %q; want none yet (pending)", ev.Proc.ExeSHA256, ev.Proc.ExeSHA256Missing)
			}
		case event.KindExeHash:
			hashAt = i
			if len(ev.Proc.ExeSHA256) != 64 || ev.Proc.ExePath != bin {
				t.Errorf("process.exe_hash: sha256 %q (missing %q) of %q; want the hash of %s", ev.Proc.ExeSHA256, ev.Proc.ExeSHA256Missing, ev.Proc.ExePath, bin)
			}
		}
	}
	if execAt < 0 || hashAt <= execAt {
		t.Errorf("exec at %d, process.exe_hash at %d: want the hash after its exec", execAt, hashAt)
	}
}
