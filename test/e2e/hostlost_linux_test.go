package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestRunHostLost: a `sandtrail run` killed with SIGKILL leaves its session
// running (its sleep goes on, in its cgroups, with its filesystem mounted).
// The next `sandtrail run` on the same data directory finds it before its
// own session, kills the sleep, journals the session's end with reason
// host_lost and its cleanup, and removes its cgroups and mounts.
func TestRunHostLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	nobodyUID(t)
	lost := e.cmd("run", "--user", "nobody", "--", "sleep", "300")
	if err := e.start(lost); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- lost.Wait() }()
	var id string
	var pid int
	waitFor(t, "the session's sleep", func() bool {
		dirs, _ := filepath.Glob(filepath.Join(e.data, "sessions", "*", "work"))
		if len(dirs) != 1 {
			return false
		}
		id = filepath.Base(filepath.Dir(dirs[0]))
		pid = sessionProcess(id, "sleep")
		return pid > 0
	})
	t.Cleanup(func() {
		if sessionProcess(id, "sleep") == pid {
			_ = syscall.Kill(pid, syscall.SIGKILL) // the test failed before the next run
		}
	})
	cgDirs := procCgroupDirs(t, pid, "/sandtrail-"+id)
	if len(cgDirs) == 0 {
		t.Fatalf("no cgroup directory of the session found for its sleep %d", pid)
	}
	sessionDir := filepath.Join(e.data, "sessions", id)
	if len(mountsBeneath(t, sessionDir)) == 0 {
		t.Fatalf("no mounts beneath %s while the session runs", sessionDir)
	}
	if err := lost.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-waited
	if sessionProcess(id, "sleep") != pid {
		t.Fatalf("the sleep died with its run; nothing is left behind to test")
	}

	r := e.run("--user", "nobody", "--", "true")
	if r.code != 0 {
		t.Fatalf("the next sandtrail run: exit %d\n%s", r.code, r.stderr)
	}
	if sessionProcess(id, "sleep") == pid {
		t.Errorf("the lost session's sleep %d is still running", pid)
	}
	for _, d := range cgDirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("the lost session's cgroup %s: Stat() = %v, want not exist", d, err)
		}
	}
	if ms := mountsBeneath(t, sessionDir); len(ms) > 0 {
		t.Errorf("mounts beneath the lost session's directory: %v", ms)
	}
	evs := e.events(id)
	term := terminate(t, evs)
	if term.Reason != "host_lost" {
		t.Errorf("session.terminate reason = %q, want host_lost", term.Reason)
	}
	if cl := kinds(evs, "session.cleanup"); len(cl) != 1 || cl[0].Session.FSState != "preserved" {
		t.Errorf("session.cleanup events = %d, want 1, preserved", len(cl))
	}
	if ts := kinds(evs, "session.terminate"); len(ts) == 1 && ts[0].Host == "" {
		t.Errorf("session.terminate has no host")
	}
	// The new run's own session is not disturbed.
	if s := r.summary; s.Reason != "normal" || s.Journal.Status != "intact" {
		t.Errorf("the next run's summary = %+v, want normal, journal intact", s)
	}
	e.verify()
}

// sessionProcess returns the pid of a process named comm in session id's
// v2 cgroup, or 0. A zombie does not count: it has ended.
func sessionProcess(id, comm string) int {
	ents, _ := os.ReadDir("/proc")
	for _, en := range ents {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		c, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil || !strings.Contains(string(cg), "/sandtrail-"+id+"\n") {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := strings.LastIndexByte(string(st), ')'); err != nil || i < 0 || strings.HasPrefix(string(st[i:]), ") Z") {
			continue
		}
		return pid
	}
	return 0
}

// procCgroupDirs returns the directories of pid's cgroups, in every
// mounted hierarchy, whose path ends in suffix.
func procCgroupDirs(t *testing.T, pid int, suffix string) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasSuffix(parts[2], suffix) {
			continue
		}
		roots := []string{"/sys/fs/cgroup/" + strings.TrimPrefix(parts[1], "name=")}
		if parts[0] == "0" {
			roots = []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}
		}
		for _, r := range roots {
			d := filepath.Join(r, parts[2])
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// mountsBeneath returns the mount points at or beneath dir in this
// process's mount namespace (the host's).
func mountsBeneath(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}
