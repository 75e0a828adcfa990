package bench

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests of the servers' stop and of the check that TestMain makes
// after the benchmarks: each leaks a server the way the harness once did,
// and the check must name its processes.

// fakeServer is a shell that starts two workers in its own process group,
// as nginx's master does, and waits for them.
func fakeServer() *exec.Cmd {
	return exec.Command("sh", "-c", "sleep 600 & sleep 600 & wait")
}

// waitMembers waits until the group pgid has n running members.
func waitMembers(t *testing.T, pgid, n int) []proc {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ps, err := groupMembers(pgid)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) == n {
			return ps
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d has %v, want %d processes", pgid, ps, n)
		}
	}
}

// leakedPids returns the pids that leftProcesses reports among those of ps.
func leakedPids(t *testing.T, groups map[int]string, ps []proc) []int {
	t.Helper()
	left, err := leftProcesses(groups)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range left {
		if slices.ContainsFunc(ps, func(q proc) bool { return q.pid == p.pid }) {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

func TestLeftProcessesFindsWorkersOfAKilledLeader(t *testing.T) {
	cmd := fakeServer()
	stop := startGroup(t, "fake server", cmd)
	pgid := cmd.Process.Pid
	members := waitMembers(t, pgid, 3)
	// The harness's old stop: the leader alone.
	cmd.Process.Kill()
	workers := waitMembers(t, pgid, 2)
	groups := map[int]string{pgid: "fake server"}
	if got := leakedPids(t, groups, workers); len(got) != 2 {
		t.Fatalf("leftProcesses found %v of the workers %v (group was %v); want both", got, workers, members)
	}
	stop() // the group stop ends the workers the leader left
	if got := leakedPids(t, groups, workers); len(got) != 0 {
		t.Fatalf("after the group's stop, leftProcesses still finds %v", got)
	}
}

func TestLeftProcessesFindsAnOrphanThatLeftTheGroup(t *testing.T) {
	// setsid takes the sleep out of the group; the shell exits at once, so
	// the sleep is an orphan, reparented to this process (TestMain makes
	// it a subreaper).
	cmd := exec.Command("sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var orphan proc
	for deadline := time.Now().Add(10 * time.Second); orphan.pid == 0; time.Sleep(20 * time.Millisecond) {
		ps, err := readProcs()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.ppid == os.Getpid() && p.cmdline == "sleep 600" {
				orphan = p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no orphan sleep (pid %s) was reparented to this process", out)
		}
	}
	if got := leakedPids(t, nil, []proc{orphan}); len(got) != 1 {
		t.Fatalf("leftProcesses does not find the orphan %v", orphan)
	}
	syscall.Kill(orphan.pid, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if got := leakedPids(t, nil, []proc{orphan}); len(got) == 0 {
			break // killed, and reaped by leftProcesses
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed orphan %v is still listed", orphan)
		}
	}
}

func TestNginxStopLeavesNoWorker(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("skipping: nginx is not installed (scripts/deps.sh bench)")
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "npm"), 0o755)
	for _, leak := range []bool{true, false} {
		before := startedGroups()
		reg := startNginx(t, root, freePort(t))
		pgid := newGroup(t, before, "nginx")
		procs := waitMembers(t, pgid, 3) // the master and its two workers
		groups := map[int]string{pgid: "nginx"}
		if leak {
			syscall.Kill(pgid, syscall.SIGKILL) // the master alone, as the harness once did
			workers := waitMembers(t, pgid, 2)
			if got := leakedPids(t, groups, workers); len(got) != 2 {
				t.Fatalf("after killing nginx's master, leftProcesses finds %v of its workers %v", got, workers)
			}
		}
		reg.stop()
		if got := leakedPids(t, groups, procs); len(got) != 0 {
			t.Fatalf("leak=%v: after nginx's stop, leftProcesses still finds %v", leak, got)
		}
	}
}

// newGroup returns the group called name started since before.
func newGroup(t *testing.T, before map[int]string, name string) int {
	t.Helper()
	for pgid, n := range startedGroups() {
		if _, old := before[pgid]; n == name && !old {
			return pgid
		}
	}
	t.Fatalf("no new %s group was started", name)
	return 0
}

// leakEnv makes TestLeakAServer leak, in the child that
// TestMainFailsWhenAServerIsLeft starts.
const leakEnv = "SANDTRAIL_BENCH_LEAK_A_SERVER"

// TestLeakAServer, in that child only, starts a fake server and stops it
// as the harness once stopped nginx, by killing its leader alone: its two
// workers are left for TestMain's check.
func TestLeakAServer(t *testing.T) {
	if os.Getenv(leakEnv) == "" {
		t.Skip("skipping: only in the child of TestMainFailsWhenAServerIsLeft")
	}
	cmd := fakeServer()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ps, err := readProcs()
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(ps, func(p proc) bool { return p.ppid == cmd.Process.Pid }) {
			break // a worker runs
		}
		if time.Now().After(deadline) {
			t.Fatal("the fake server started no worker")
		}
	}
	time.Sleep(50 * time.Millisecond) // and the second
	cmd.Process.Kill()
	cmd.Wait()
}

func TestMainFailsWhenAServerIsLeft(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeakAServer$", "-test.count=1")
	cmd.Env = append(os.Environ(), leakEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("the test binary that leaked a server exited with %v, want status 1:\n%s", err, out)
	}
	if n := strings.Count(string(out), "bench: LEAK: "); n != 2 {
		t.Fatalf("the check named %d leaked processes, want the 2 workers:\n%s", n, out)
	}
	if !strings.Contains(string(out), "bench: FAIL: the benchmarks left processes running") {
		t.Fatalf("the check did not fail the run:\n%s", out)
	}
	t.Logf("%s", out)
}
