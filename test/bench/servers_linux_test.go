package bench

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The servers the benchmarks start (sandtrail's mirror and daemon, nginx,
// Verdaccio) each run in a process group of their own, and are stopped by
// group: nginx's master and Verdaccio's node leave workers behind when
// only the leader is killed. The groups started are remembered, and
// TestMain checks, after the benchmarks, that none of their processes is
// left, nor any orphan reparented to the test process (a subreaper).

// serverStopGrace is how long a server has to exit after SIGTERM before its
// group is killed.
const serverStopGrace = 10 * time.Second

// serverGroups are the process groups started by startServer, by id.
var serverGroups struct {
	sync.Mutex
	names map[int]string
}

// rememberGroup records the process group pgid as started, under name.
func rememberGroup(pgid int, name string) {
	serverGroups.Lock()
	defer serverGroups.Unlock()
	if serverGroups.names == nil {
		serverGroups.names = map[int]string{}
	}
	serverGroups.names[pgid] = name
}

// startedGroups returns the ids of the process groups started so far.
func startedGroups() map[int]string {
	serverGroups.Lock()
	defer serverGroups.Unlock()
	groups := make(map[int]string, len(serverGroups.names))
	for pgid, name := range serverGroups.names {
		groups[pgid] = name
	}
	return groups
}

// startServer starts cmd in a process group of its own and waits until addr
// accepts connections. The server is stopped, by group, when b ends, or by
// the registry's stop.
func startServer(b testing.TB, name, url, addr string, cmd *exec.Cmd) registry {
	b.Helper()
	stop := startGroup(b, name, cmd)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s did not listen on %s", name, addr)
		}
	}
	return registry{name: name, url: url, stop: stop}
}

// startGroup starts cmd as the leader of a new process group, remembered
// under name, and returns the function that stops the group (once; it also
// runs when b ends).
func startGroup(b testing.TB, name string, cmd *exec.Cmd) (stop func()) {
	b.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pgid = true, 0
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting %s: %v", name, err)
	}
	rememberGroup(cmd.Process.Pid, name)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := stopGroup(cmd, serverStopGrace); err != nil {
				b.Errorf("stopping %s: %v", name, err)
			}
		})
	}
	b.Cleanup(stop)
	return stop
}

// stopGroup stops the process group that cmd leads: SIGTERM to the group
// (a graceful stop for nginx, node and sandtrail), then, if the leader or
// any member is still running after grace, SIGKILL to the group. It waits
// for the leader and for every member to be gone, and returns an error
// naming what was still running after the SIGKILL.
func stopGroup(cmd *exec.Cmd, grace time.Duration) error {
	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	syscall.Kill(-pgid, syscall.SIGTERM)
	if groupGone(pgid, exited, time.Now().Add(grace)) {
		return nil
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	if groupGone(pgid, exited, time.Now().Add(5*time.Second)) {
		return nil
	}
	left, _ := groupMembers(pgid)
	return fmt.Errorf("process group %d still has %v after SIGKILL", pgid, left)
}

// groupGone waits until the leader has exited (exited is closed) and no
// member of the group pgid is running, or until deadline; it reports
// whether the group is gone.
func groupGone(pgid int, exited <-chan struct{}, deadline time.Time) bool {
	for ; ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			left, err := groupMembers(pgid)
			if err == nil && len(left) == 0 {
				return true
			}
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// proc is one process as /proc/<pid>/stat shows it.
type proc struct {
	pid, ppid, pgid int
	state           byte
	cmdline         string
}

func (p proc) String() string {
	return fmt.Sprintf("pid %d (ppid %d, pgid %d, %q)", p.pid, p.ppid, p.pgid, p.cmdline)
}

// readProcs lists the processes of /proc.
func readProcs() ([]proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var ps []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone since the listing
		}
		p, err := parseProcStat(pid, string(stat))
		if err != nil {
			return nil, err
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		p.cmdline = strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
		ps = append(ps, p)
	}
	return ps, nil
}

// parseProcStat reads state, ppid and pgrp from a /proc/<pid>/stat line,
// whose second field (comm, in parentheses) may hold spaces and
// parentheses of its own.
func parseProcStat(pid int, stat string) (proc, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return proc{}, fmt.Errorf("/proc/%d/stat: no comm: %q", pid, stat)
	}
	f := strings.Fields(stat[end+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return proc{}, fmt.Errorf("/proc/%d/stat: short: %q", pid, stat)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2); err != nil {
		return proc{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return proc{pid: pid, ppid: ppid, pgid: pgid, state: f[0][0]}, nil
}

// groupMembers returns the running processes of the group pgid, and reaps
// those that have exited, orphans reparented to this process (its
// subreaper), so that they do not count as members.
func groupMembers(pgid int) ([]proc, error) {
	ps, err := readProcs()
	if err != nil {
		return nil, err
	}
	var left []proc
	for _, p := range ps {
		if p.pgid != pgid {
			continue
		}
		if p.state == 'Z' {
			if p.ppid == os.Getpid() && p.pid != pgid { // the leader is cmd.Wait's
				var ws syscall.WaitStatus
				syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
			}
			continue
		}
		left = append(left, p)
	}
	return left, nil
}

// leftProcesses returns the processes still running that the benchmarks
// started and should have stopped: members of any process group in groups,
// and children of this process (which, as a subreaper, inherits the
// orphans of everything it started). It reaps orphans that have exited.
// Call it when every command started has been waited for.
func leftProcesses(groups map[int]string) ([]proc, error) {
	ps, err := readProcs()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var left []proc
	for _, p := range ps {
		_, ours := groups[p.pgid]
		if p.pid == self || !ours && p.ppid != self {
			continue
		}
		if p.state == 'Z' {
			if p.ppid == self {
				var ws syscall.WaitStatus
				syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
			}
			continue
		}
		left = append(left, p)
	}
	slices.SortFunc(left, func(a, b proc) int { return a.pid - b.pid })
	return left, nil
}

// checkNoServersLeft reports, on stderr, every process that the
// benchmarks left running, kills each of them by pid, and returns false if
// there was any.
func checkNoServersLeft() bool {
	groups := startedGroups()
	left, err := leftProcesses(groups)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: listing the processes left: %v\n", err)
		return false
	}
	for _, p := range left {
		fmt.Fprintf(os.Stderr, "bench: LEAK: %s was started by the benchmarks (%s) and is still running; killing it\n",
			p, cmp.Or(groups[p.pgid], "a child of the test process"))
		syscall.Kill(p.pid, syscall.SIGKILL)
	}
	return len(left) == 0
}

// killStartedGroups kills every process group started, for a benchmark run
// that is interrupted before its cleanups.
func killStartedGroups() {
	for pgid := range startedGroups() {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort(b testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
