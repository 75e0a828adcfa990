//go:build 386 || amd64 || arm64

package collector

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
)

func runIn(t *testing.T, cg *cgrouptest.Cgroup, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = cg.SysProcAttr(t, nobody)
	if err := cmd.Run(); err != nil {
		t.Fatalf("running %v: %v", args, err)
	}
}

func TestWatchUnwatch(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	r := startRecorder(t, false)
	const sid = "sess-unwatch"
	if err := r.c.Watch(0, sid); err == nil {
		t.Errorf("Watch(0) = nil, want an error")
	}
	if err := r.c.Watch(cg.ID, ""); err == nil {
		t.Errorf("Watch(id, \"\") = nil, want an error")
	}
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	runIn(t, cg, "/bin/true", "first")
	if err := r.c.Unwatch(cg.ID); err != nil {
		t.Fatalf("Unwatch() = %v", err)
	}
	if err := r.c.Unwatch(cg.ID); err != nil {
		t.Errorf("Unwatch() twice = %v, want nil", err)
	}
	runIn(t, cg, "/bin/true", "second")
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatalf("Watch() again = %v", err)
	}
	runIn(t, cg, "/bin/true", "third")
	evs := r.stop(t)
	var got []string
	for _, ev := range findExec(evs, "/bin/true") {
		if ev.SessionID != sid {
			t.Errorf("exec of %q has session %q, want %q", ev.Proc.Argv, ev.SessionID, sid)
		}
		got = append(got, ev.Proc.Argv[1])
	}
	if len(got) != 2 || got[0] != "first" || got[1] != "third" {
		t.Errorf("recorded execs = %q, want [first third]", got)
	}
	if err := r.c.Watch(cg.ID, sid); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch() after Close = %v, want ErrClosed", err)
	}
	if err := r.c.Close(); err != nil {
		t.Errorf("Close() twice = %v, want nil", err)
	}
}

func TestHostWide(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	// The whole host's processes: a large queue, so that the one exec
	// looked for is not dropped while other work runs.
	r := startRecorder(t, false, WithHostWide(true), WithQueueSize(1<<18))
	runIn(t, cg, "/bin/true", "host-wide")
	evs := r.stop(t)
	var hits int
	for _, ev := range findExec(evs, "/bin/true") {
		if len(ev.Proc.Argv) == 2 && ev.Proc.Argv[1] == "host-wide" && ev.Proc.CgroupID == cg.ID {
			hits++
			if ev.SessionID != "" {
				t.Errorf("host-wide exec session = %q, want none", ev.SessionID)
			}
		}
	}
	if hits != 1 {
		t.Errorf("host-wide execs of the unwatched cgroup = %d, want 1", hits)
	}
}

func TestOptions(t *testing.T) {
	for _, c := range []struct {
		name    string
		opt     Option
		wantErr bool
	}{
		{"ring buffer power of two", WithRingBufferSize(1 << 20), false},
		{"ring buffer not a power of two", WithRingBufferSize(3 << 20), true},
		{"ring buffer zero", WithRingBufferSize(0), true},
		{"ring buffer below a page", WithRingBufferSize(1024), true},
		{"queue", WithQueueSize(1), false},
		{"queue zero", WithQueueSize(0), true},
		{"loss interval", WithLossInterval(0), true},
		{"drain timeout negative", WithDrainTimeout(-1), true},
		{"wake-up for every record", WithWakeup(0, time.Millisecond), false},
		{"wake-up bytes negative", WithWakeup(-1, time.Millisecond), true},
		{"wake-up interval zero", WithWakeup(4096, 0), true},
		{"wake-up past the ring buffer", WithWakeup(DefaultRingBufferSize, time.Millisecond), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := buildOptions([]Option{c.opt})
			if (err != nil) != c.wantErr {
				t.Errorf("buildOptions(%s) = %v, want error %v", c.name, err, c.wantErr)
			}
			if c.wantErr {
				if _, err := New(nil, c.opt); err == nil {
					t.Errorf("New(%s) = nil error, want one", c.name)
				}
			}
		})
	}
}

// TestExecFromThread checks an exec by a thread that is not the leader: the
// exec is recorded under the process id.
func TestExecFromThread(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	r := startRecorder(t, false)
	if err := r.c.Watch(cg.ID, "sess-thread"); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"=exec-from-thread")
	cmd.SysProcAttr = cg.SysProcAttr(t, -1)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	evs := inSession(r.stop(t), "sess-thread", event.KindExec)
	got := findExec(evs, "/bin/true")
	if len(got) != 1 || got[0].Proc.Pid != int32(cmd.Process.Pid) {
		t.Errorf("exec of /bin/true from a thread = %v, want one with pid %d", kinds(got), cmd.Process.Pid)
	}
}

// TestNewUnprivileged runs New as uid 65534 and checks that it fails with
// ErrPermission and says what it needs.
func TestNewUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to start a process as another user")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy the other user can run: the test binary's own directory is
	// private.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "helper")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), helperEnv+"=new")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	is, msg, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	t.Logf("New() as uid %d: %s", nobody, msg)
	if is != "true" || !strings.Contains(msg, "CAP_BPF") {
		t.Errorf("New() as uid %d = %q, want ErrPermission naming CAP_BPF", nobody, msg)
	}
}
