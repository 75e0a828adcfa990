//go:build linux

package session_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/collector/session"
	"github.com/sandtrail/sandtrail/record/event"
)

func init() {
	hostHelper = runHostHelper
}

// runHostHelper is the helper mode "host ROOT": a manager on ROOT with one
// session whose main process sleeps; it prints the session's id and the
// sleeper's pid, then waits to be killed.
func runHostHelper(args []string) int {
	m, err := session.NewManager(hclog.NewNullLogger(), func(*event.Event) {}, session.WithRoot(args[0]))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := m.Create(context.Background(), session.Spec{User: "alice", Limits: event.Limits{DiskBytes: 1 << 20, Pids: 64}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := exec.Command("sh", "-c", "echo kept > kept.txt; exec sleep 300")
	if err := s.Start(context.Background(), cmd); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for {
		if _, err := os.Stat(filepath.Join(s.Workdir(), "kept.txt")); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println(s.ID(), cmd.Process.Pid)
	select {}
}

// TestAbandoned: a manager killed with SIGKILL leaves its session running,
// mounted and in its cgroups; a later manager on the same root finds it,
// ends it with host_lost (killing its process) and cleans it up.
func TestAbandoned(t *testing.T) {
	needRoot(t)
	root := t.TempDir()
	dead := helperCmd(t, "host", root)
	out, err := dead.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dead.Stderr = os.Stderr
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	var pid int
	if _, err := fmt.Fscan(bufio.NewReader(out), &id, &pid); err != nil {
		dead.Process.Kill()
		dead.Wait()
		t.Fatalf("reading the dead host's session: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // when the test fails before the kill
	dead.Process.Signal(syscall.SIGKILL)
	dead.Wait()
	if !alive(pid) {
		t.Fatal("the session's process died with its host")
	}

	r := &recorder{}
	m, err := session.NewManager(hclog.NewNullLogger(), r.emit, session.WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ss, err := m.Abandoned(ctx)
	if err != nil || len(ss) != 1 || ss[0].ID() != id {
		t.Fatalf("Abandoned() = %v, %v, want session %s", ss, err, id)
	}
	s := ss[0]
	if s.Spec().User != "alice" || s.Spec().Limits.Pids != 64 {
		t.Errorf("adopted spec = %+v, want the dead host's", s.Spec())
	}
	if got, ok := m.Lookup(s.CgroupID()); !ok || got != id {
		t.Errorf("Lookup(%d) = %q, %v, want %s", s.CgroupID(), got, ok, id)
	}
	cgDirs := sessionCgroupDirs(t, pid)
	if len(cgDirs) == 0 {
		t.Fatal("found none of the session's cgroups from its process")
	}
	if again, err := m.Abandoned(ctx); err != nil || len(again) != 0 {
		t.Errorf("Abandoned() again = %v, %v, want none: the session is this manager's", again, err)
	}
	if err := s.Terminate(ctx, session.ReasonHostLost, nil); err != nil {
		t.Fatalf("Terminate(host_lost) = %v", err)
	}
	if alive(pid) {
		t.Errorf("the session's process %d is alive after Terminate", pid)
	}
	if err := s.Cleanup(ctx, session.FSPreserved); err != nil {
		t.Fatalf("Cleanup(preserved) = %v", err)
	}
	for _, d := range cgDirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s after Cleanup: Stat() = %v, want not exist", d, err)
		}
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), " "+filepath.Join(root, id)) {
		t.Errorf("mounts beneath the session's directory after Cleanup:\n%s", mi)
	}
	if b, err := os.ReadFile(filepath.Join(root, id, "work", "kept.txt")); err != nil || string(b) != "kept\n" {
		t.Errorf("preserved workdir's kept.txt = %q, %v, want kept", b, err)
	}
	if _, err := os.Stat(filepath.Join(root, id, "session.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file after Cleanup: Stat() = %v, want not exist", err)
	}
	var ops []string
	for _, e := range r.all() {
		if e.Session != nil {
			ops = append(ops, e.Session.Op+":"+e.Session.Reason+e.Session.FSState)
		}
	}
	if got, want := strings.Join(ops, ","), "terminate:host_lost,cleanup:preserved"; got != want {
		t.Errorf("ops = %s, want %s", got, want)
	}
}

// sessionCgroupDirs returns the directories of the cgroups of pid that
// are a session's (sandtrail-…), in every mounted hierarchy.
func sessionCgroupDirs(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], "/sandtrail-") {
			continue
		}
		var cands []string
		if parts[0] == "0" {
			cands = []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}
		} else {
			cands = []string{"/sys/fs/cgroup/" + strings.TrimPrefix(parts[1], "name=")}
		}
		for _, c := range cands {
			if d := filepath.Join(c, parts[2]); isDir(d) {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// alive reports whether pid exists and is not a zombie (whose reaping
// is its new parent's business, after its host died).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && !strings.HasPrefix(string(b[i:]), ") Z") && !strings.HasPrefix(string(b[i:]), ") X")
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// TestAbandonedSkipsLive: a session whose manager is alive is not
// abandoned, even when another manager of the same root asks, and
// host_lost is refused for it.
func TestAbandonedSkipsLive(t *testing.T) {
	r := &recorder{}
	root := t.TempDir()
	needRoot(t)
	a, err := session.NewManager(hclog.NewNullLogger(), r.emit, session.WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	s := create(t, a, session.Spec{})
	b, err := session.NewManager(hclog.NewNullLogger(), r.emit, session.WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	if ss, err := b.Abandoned(context.Background()); err != nil || len(ss) != 0 {
		t.Errorf("Abandoned() = %v, %v, want none while the session's manager lives", ss, err)
	}
	if err := s.Terminate(context.Background(), session.ReasonHostLost, nil); !errors.Is(err, session.ErrInvalidSpec) {
		t.Errorf("Terminate(host_lost) of a live session = %v, want ErrInvalidSpec", err)
	}
}
