//go:build linux

package session_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/collector/session"
	"github.com/sandtrail/sandtrail/kernel/cgroup"
	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
)

// The test binary doubles as the programs the sessions run.
const helperEnv = "SANDTRAIL_SESSION_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func helper(mode string, args []string) int {
	switch mode {
	case "alloc": // allocate and touch args[0] MiB
		n, _ := strconv.Atoi(args[0])
		var keep [][]byte
		for range n {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println(len(keep))
		return 0
	case "counter": // write an increasing counter to args[0]
		for i := 0; ; i++ {
			os.WriteFile(args[0]+".tmp", []byte(strconv.Itoa(i)), 0o644)
			os.Rename(args[0]+".tmp", args[0])
			time.Sleep(5 * time.Millisecond)
		}
	case "busy":
		for {
		}
	case "write": // write args[1] MiB into args[0], then sleep
		n, _ := strconv.Atoi(args[1])
		f, err := os.Create(args[0])
		if err != nil {
			return 1
		}
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = byte(i)
		}
		for range n {
			f.Write(b)
		}
		f.Sync()
		time.Sleep(time.Minute)
		return 0
	case "host": // a manager whose session outlives it (abandoned_linux_test.go)
		return hostHelper(args)
	}
	return 2
}

// hostHelper is the helper mode "host", set by abandoned_linux_test.go.
var hostHelper func(args []string) int

func helperCmd(t *testing.T, mode string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	return cmd
}

// recorder collects emitted events without blocking.
type recorder struct {
	mu     sync.Mutex
	events []*event.Event
}

func (r *recorder) emit(e *event.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) all() []*event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*event.Event(nil), r.events...)
}

// waitFor waits up to d for an event matching f.
func (r *recorder) waitFor(t *testing.T, d time.Duration, what string, f func(*event.Event) bool) *event.Event {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, e := range r.all() {
			if f(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event within %v; events: %s", what, d, dump(r.all()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dump(es []*event.Event) string {
	var b strings.Builder
	for _, e := range es {
		j, _ := event.Marshal(e)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func isLimit(typ string) func(*event.Event) bool {
	return func(e *event.Event) bool { return e.Kind == event.KindLimitHit && e.Limit.Type == typ }
}

func isOp(op string) func(*event.Event) bool {
	return func(e *event.Event) bool { return e.Session != nil && e.Session.Op == op }
}

func needRoot(t *testing.T) {
	t.Helper()
	cgrouptest.RequireRoot(t)
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		t.Skip("no cgroup file system mounted at /sys/fs/cgroup")
	}
}

func newManager(t *testing.T, r *recorder) *session.Manager {
	t.Helper()
	needRoot(t)
	m, err := session.NewManager(hclog.NewNullLogger(), r.emit,
		session.WithRoot(t.TempDir()), session.WithHostID("test-host"), session.WithPollInterval(100*time.Millisecond))
	if errors.Is(err, session.ErrNoCgroups) {
		t.Skipf("no usable cgroup2 hierarchy: %v", err)
	}
	if err != nil {
		t.Fatalf("NewManager() = %v", err)
	}
	return m
}

// create makes a session and makes sure it is terminated and cleaned up.
func create(t *testing.T, m *session.Manager, spec session.Spec) *session.Session {
	t.Helper()
	s, err := m.Create(context.Background(), spec)
	if errors.Is(err, session.ErrControllerUnavailable) {
		t.Skipf("host lacks a controller: %v", err)
	}
	if err != nil {
		t.Fatalf("Create() = %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Terminate(ctx, session.ReasonAPI, nil); err != nil {
			t.Errorf("Terminate() = %v", err)
		}
		if err := s.Cleanup(ctx, session.FSDeleted); err != nil && !errors.Is(err, session.ErrState) {
			t.Errorf("Cleanup() = %v", err)
		}
	})
	return s
}

func waitDone(t *testing.T, s *session.Session, d time.Duration) (string, *int32) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(d):
		t.Fatalf("session did not end within %v", d)
	}
	return s.Result()
}

func TestLifecycleEventsAndCleanup(t *testing.T) {
	r := &recorder{}
	m := newManager(t, r)
	ctx := context.Background()
	s := create(t, m, session.Spec{Tenant: "acme", User: "alice", Template: "py311",
		Limits: event.Limits{MemoryBytes: 256 << 20, Pids: 100, CPUs: 1}})
	if got := s.ID(); len(got) != 16 {
		t.Errorf("ID() = %q, want a 16-character generated id", got)
	}
	if id, ok := m.Lookup(s.CgroupID()); !ok || id != s.ID() {
		t.Errorf("Lookup(%d) = %q, %v, want %q, true", s.CgroupID(), id, ok, s.ID())
	}
	var st os.FileInfo
	st, err := os.Stat(s.CgroupPath())
	if err != nil {
		t.Fatal(err)
	}
	if ino := st.Sys().(*syscall.Stat_t).Ino; ino != s.CgroupID() {
		t.Errorf("CgroupID() = %d, want the v2 directory's inode %d", s.CgroupID(), ino)
	}

	cmd := exec.Command("sh", "-c", "cat /proc/self/cgroup > cg.txt; echo hi > out.txt; exit 3")
	if err := s.Start(ctx, cmd); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	reason, status := waitDone(t, s, 30*time.Second)
	if reason != session.ReasonNormal || status == nil || *status != 3 {
		t.Errorf("Result() = %q, %v, want normal, 3", reason, status)
	}

	// The process was inside the session's cgroups in every hierarchy.
	b, err := os.ReadFile(filepath.Join(s.Workdir(), "cg.txt"))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := cgroup.ParseProcCgroup(b)
	if err != nil {
		t.Fatal(err)
	}
	name := "sandtrail-" + s.ID()
	if !strings.HasSuffix(pc.V2, "/"+name) {
		t.Errorf("child's v2 cgroup = %q, want …/%s", pc.V2, name)
	}
	for c := range m.Layout().V1 {
		if c != "memory" && c != "pids" && c != "cpu" {
			continue
		}
		if !strings.HasSuffix(pc.V1[c], "/"+name) {
			t.Errorf("child's %s cgroup = %q, want …/%s", c, pc.V1[c], name)
		}
	}

	if err := s.Cleanup(ctx, session.FSSnapshot); err != nil {
		t.Fatalf("Cleanup(snapshot) = %v", err)
	}
	if _, err := os.Stat(s.CgroupPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("v2 cgroup after Cleanup: Stat() = %v, want not exist", err)
	}
	for c, d := range m.Layout().V1 {
		if _, err := os.Stat(filepath.Join(d.Path, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s cgroup after Cleanup: Stat() = %v, want not exist", c, err)
		}
	}
	if _, ok := m.Lookup(s.CgroupID()); ok {
		t.Errorf("Lookup after Cleanup found the session")
	}

	var ops []string
	for _, e := range r.all() {
		if err := e.Validate(); err != nil {
			t.Errorf("event %s: Validate() = %v", e.Kind, err)
		}
		if e.SessionID != s.ID() || e.Host != "test-host" || e.Source != event.SourceSession {
			t.Errorf("event %s: session_id, host, source = %q, %q, %q", e.Kind, e.SessionID, e.Host, e.Source)
		}
		if e.Session != nil {
			ops = append(ops, e.Session.Op)
		}
	}
	if got, want := strings.Join(ops, ","), "create,start,terminate,cleanup"; got != want {
		t.Errorf("ops = %s, want %s", got, want)
	}
	c := r.waitFor(t, 0, "create", isOp("create")).Session
	if c.Tenant != "acme" || c.User != "alice" || c.Template != "py311" || c.Limits == nil || c.Limits.MemoryBytes != 256<<20 {
		t.Errorf("create = %+v, want tenant, user, template and limits", c)
	}
	stt := r.waitFor(t, 0, "start", isOp("start")).Session
	if stt.Host != "test-host" || stt.Limits == nil || stt.Limits.Pids != 100 {
		t.Errorf("start = %+v, want host and limits", stt)
	}
	cl := r.waitFor(t, 0, "cleanup", isOp("cleanup")).Session
	if cl.FSState != session.FSSnapshot || len(cl.SnapshotSHA256) != 64 {
		t.Errorf("cleanup = %+v, want snapshot with a sha256", cl)
	}
	tarPath := filepath.Join(filepath.Dir(s.Workdir()), "snapshot.tar")
	if out, err := exec.Command("tar", "-xOf", tarPath, "./out.txt").CombinedOutput(); err != nil {
		if out2, err2 := exec.Command("tar", "-xOf", tarPath, "out.txt").CombinedOutput(); err2 != nil || string(out2) != "hi\n" {
			t.Errorf("tar -xOf snapshot out.txt = %q, %v / %q, %v, want hi", out, err, out2, err2)
		}
	}
	if out, err := exec.Command("sha256sum", tarPath).Output(); err != nil || !strings.HasPrefix(string(out), cl.SnapshotSHA256) {
		t.Errorf("sha256sum snapshot = %q, %v, want %s", out, err, cl.SnapshotSHA256)
	}
}

func TestMemoryOOM(t *testing.T) {
	r := &recorder{}
	m := newManager(t, r)
	const limit = 64 << 20
	s := create(t, m, session.Spec{Limits: event.Limits{MemoryBytes: limit}})
	cmd := helperCmd(t, "alloc", "512")
	if err := s.Start(context.Background(), cmd); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	pid := int32(cmd.Process.Pid)
	reason, status := waitDone(t, s, 60*time.Second)
	if reason != session.ReasonOOM {
		t.Errorf("terminate reason = %q, want oom; events: %s", reason, dump(r.all()))
	}
	if status == nil || *status != 128+9 {
		t.Errorf("exit status = %v, want 137 (SIGKILL)", status)
	}
	e := r.waitFor(t, 5*time.Second, "memory_oom", isLimit(session.LimitMemory))
	if e.Proc == nil || e.Proc.Pid != pid {
		t.Errorf("memory_oom proc = %+v, want pid %d", e.Proc, pid)
	}
	if e.Limit.Configured != limit || e.Limit.Action != session.ActionKill || e.Limit.Unit != "bytes" {
		t.Errorf("memory_oom limit = %+v, want configured %d, action kill, unit bytes", e.Limit, limit)
	}
	// The peak usage reaches the limit (within a page's rounding).
	if e.Limit.Measured < limit-(1<<20) || e.Limit.Measured > limit+(1<<20) {
		t.Errorf("memory_oom measured = %d, want about %d", e.Limit.Measured, limit)
	}
	// The limit hit comes before the end of the session.
	var order []string
	for _, e := range r.all() {
		order = append(order, e.Kind)
	}
	t.Logf("events:\n%s", dump(r.all()))
	if i, j := index(order, event.KindLimitHit), index(order, event.KindSessionTerminate); i < 0 || j < 0 || i > j {
		t.Errorf("event order = %v, want limit.hit before session.terminate", order)
	}
}

// TestMemoryOOMChild: the OOM victim is a child of the main process, so
// its pid can only come from the kernel log (no collector runs here), and
// the session goes on after it.
func TestMemoryOOMChild(t *testing.T) {
	r := &recorder{}
	m := newManager(t, r)
	if f, err := os.Open("/dev/kmsg"); err != nil {
		t.Skipf("kernel log unreadable: %v", err)
	} else {
		f.Close()
	}
	const limit = 64 << 20
	s := create(t, m, session.Spec{Limits: event.Limits{MemoryBytes: limit}})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(s.Workdir(), "child.pid")
	cmd := exec.Command("sh", "-c", `"$0" 512 & echo $! > "$1"; wait $!; sleep 0.5; exit 0`, exe, pidfile)
	cmd.Env = append(os.Environ(), helperEnv+"=alloc")
	if err := s.Start(context.Background(), cmd); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	reason, status := waitDone(t, s, 60*time.Second)
	if reason != session.ReasonNormal || status == nil || *status != 0 {
		t.Errorf("Result() = %q, %v, want normal, 0 (the main process survived)", reason, status)
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	e := r.waitFor(t, 5*time.Second, "memory_oom", isLimit(session.LimitMemory))
	if e.Proc == nil || e.Proc.Pid != int32(child) || e.Proc.Comm == "" {
		t.Errorf("memory_oom proc = %+v, want the child's pid %d and its comm", e.Proc, child)
	}
	if n := count(r.all(), isLimit(session.LimitMemory)); n != 1 {
		t.Errorf("memory_oom events = %d, want 1", n)
	}
}

func index(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func TestOOMVictimHook(t *testing.T) {
	r := &recorder{}
	m := newManager(t, r)
	s := create(t, m, session.Spec{Limits: event.Limits{MemoryBytes: 64 << 20}})
	m.OOMVictim(s.CgroupID(), 4242, "hog")
	m.OOMVictim(s.CgroupID()+1<<40, 4343, "elsewhere") // not a session: ignored
	if err := s.Start(context.Background(), exec.Command("sleep", "60")); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	e := r.waitFor(t, 10*time.Second, "memory_oom", isLimit(session.LimitMemory))
	if e.Proc == nil || e.Proc.Pid != 4242 || e.Proc.Comm != "hog" {
		t.Errorf("memory_oom proc = %+v, want pid 4242 comm hog", e.Proc)
	}
	time.Sleep(300 * time.Millisecond)
	n := 0
	for _, e := range r.all() {
		if e.Limit != nil {
			n++
		}
	}
	if n != 1 {
		t.Errorf("limit.hit events = %d, want 1; %s", n, dump(r.all()))
	}
}

func TestTimeout(t *testing.T) {
	r := &recorder{}
	m := newManager(t, r)
	s := create(t, m, session.Spec{Limits: event.Limits{TimeoutMS: 2000}})
	start := time.Now()
	if err := s.Start(context.Background(), exec.Command("sleep", "60")); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	reason, status := waitDone(t, s, 60*time.Second)
	if reason != session.ReasonTimeout {
		t.Errorf("terminate reason = %q, want timeout", reason)
	}
	if status == nil || *status != 137 {
		t.Errorf("exit status = %v, want 137", status)
	}
	if el := time.Since(start); el < 2*time.Second {
		t.Errorf("session ended after %v, before its 2s timeout", el)
	}
	e := r.waitFor(t, 0, "timeout", isLimit(session.LimitTimeout))
	if e.Limit.Configured != 2000 || e.Limit.Measured < 2000 || e.Limit.Action != session.ActionKill {
		t.Errorf("timeout limit = %+v, want configured 2000, measured >= 2000, action kill", e.Limit)
	}
}

func TestPidsContained(t *testing.T) {
	r := &recorder{}
	m := newManager(t, r)
	s := create(t, m, session.Spec{Limits: event.Limits{Pids: 64}})
	// bash, unlike dash, keeps looping when a fork fails.
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash for a fork loop that survives refused forks")
	}
	if err := s.Start(context.Background(), exec.Command("bash", "-c", "while :; do sleep 1 & done")); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	// Watch for 2 s after the first pids event (at most 60 s in all).
	start := time.Now()
	var first time.Time
	maxSeen := 0
	for time.Since(start) < time.Minute && (first.IsZero() || time.Since(first) < 2*time.Second) {
		b, err := os.ReadFile(filepath.Join(s.CgroupPath(), "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		maxSeen = max(maxSeen, len(strings.Fields(string(b))))
		if first.IsZero() && count(r.all(), isLimit(session.LimitPids)) > 0 {
			first = time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	if maxSeen < 32 {
		t.Errorf("processes in the session = %d at most, want the fork loop to reach the limit", maxSeen)
	}
	if maxSeen > 64 {
		t.Errorf("processes in the session = %d at most, want <= 64", maxSeen)
	}
	e := r.waitFor(t, 0, "pids", isLimit(session.LimitPids))
	if e.Limit.Configured != 64 || e.Limit.Measured > 64 || e.Limit.Unit != "count" {
		t.Errorf("pids limit = %+v, want configured 64, measured <= 64", e.Limit)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Terminate(ctx, session.ReasonAPI, nil); err != nil {
		t.Fatalf("Terminate() = %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(s.CgroupPath(), "cgroup.procs")); len(b) != 0 {
		t.Errorf("cgroup.procs after Terminate = %q, want empty", b)
	}
	// bash retries a refused fork a few times and may then give up and
	// exit; the session has ended "normal" on its own then, before
	// Terminate. Terminate's own reason is asserted by the other tests.
	switch reason, status := s.Result(); {
	case reason == session.ReasonNormal && status != nil:
		t.Logf("the fork loop's shell gave up (exit %d) before Terminate", *status)
	case reason != session.ReasonAPI:
		t.Errorf("terminate reason = %q, want api", reason)
	}
}

func count(es []*event.Event, f func(*event.Event) bool) int {
	n := 0
	for _, e := range es {
		if f(e) {
			n++
		}
	}
	return n
}

func TestCPUThrottle(t *testing.T) {
	r := &recorder{}
	m := newManager(t, r)
	s := create(t, m, session.Spec{Limits: event.Limits{CPUs: 0.2}})
	if err := s.Start(context.Background(), helperCmd(t, "busy")); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	e := r.waitFor(t, 30*time.Second, "cpu_throttle", isLimit(session.LimitCPU))
	if e.Limit.Measured <= 0 || e.Limit.Configured != 20000 || e.Limit.Unit != "usec" || e.Limit.Action != session.ActionThrottle {
		t.Errorf("cpu_throttle = %+v, want measured > 0, configured 20000 usec, throttle", e.Limit)
	}
	// At most one event per 5 s: within the next 2 s there is no second.
	time.Sleep(2 * time.Second)
	var ts []time.Time
	for _, e := range r.all() {
		if isLimit(session.LimitCPU)(e) {
			ts = append(ts, e.TS)
		}
	}
	for i := 1; i < len(ts); i++ {
		if d := ts[i].Sub(ts[i-1]); d < 5*time.Second {
			t.Errorf("cpu_throttle events %v apart, want at least 5s", d)
		}
	}
}

// TestDiskQuota writes 4 MiB into a session of 1 MiB, in the workdir and
// in the private /tmp, /var/tmp and /dev/shm: the kernel stops each write
// at the quota, disk_quota is reported, the session goes on, and the
// host's directories do not receive the files.
func TestDiskQuota(t *testing.T) {
	for _, dir := range []string{"", "/tmp", "/var/tmp", "/dev/shm"} {
		t.Run("dir="+dir, func(t *testing.T) {
			r := &recorder{}
			m := newManager(t, r)
			s := create(t, m, session.Spec{Limits: event.Limits{DiskBytes: 1 << 20}})
			name := filepath.Join(dir, "sandtrail-disk-"+s.ID())
			if dir == "" {
				name = "big"
			}
			if err := s.Start(context.Background(), helperCmd(t, "write", name, "4")); err != nil {
				t.Fatalf("Start() = %v", err)
			}
			e := r.waitFor(t, 30*time.Second, "disk_quota", isLimit(session.LimitDisk))
			if e.Limit.Configured != 1<<20 || e.Limit.Measured < 1<<20-4096 || e.Limit.Action != session.ActionThrottle {
				t.Errorf("disk_quota = %+v, want measured about configured 1 MiB, action throttle", e.Limit)
			}
			select {
			case <-s.Done():
				t.Errorf("session ended on a full disk; want it to go on")
			default:
			}
			if dir == "" {
				if fi, err := os.Stat(filepath.Join(s.Workdir(), name)); err != nil || fi.Size() > 1<<20 {
					t.Errorf("workdir file: Stat() = %v, %v, want at most 1 MiB", fi, err)
				}
			} else if _, err := os.Lstat(name); !errors.Is(err, os.ErrNotExist) {
				os.Remove(name)
				t.Errorf("host's %s: Lstat() = %v, want not exist (private)", name, err)
			}
		})
	}
}

func TestPauseResume(t *testing.T) {
	r := &recorder{}
	m := newManager(t, r)
	ctx := context.Background()
	s := create(t, m, session.Spec{})
	file := filepath.Join(s.Workdir(), "counter")
	if err := s.Start(ctx, helperCmd(t, "counter", file)); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	read := func() int {
		b, _ := os.ReadFile(file)
		n, _ := strconv.Atoi(string(b))
		return n
	}
	waitAdvance := func(from int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); read() <= from; {
			if time.Now().After(deadline) {
				t.Fatalf("counter stuck at %d", from)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitAdvance(0)
	if err := s.Pause(ctx, session.PauseAPI, "alice"); err != nil {
		t.Fatalf("Pause() = %v", err)
	}
	before := read()
	time.Sleep(time.Second)
	if after := read(); after != before {
		t.Errorf("counter moved from %d to %d while paused", before, after)
	}
	if err := s.Pause(ctx, session.PauseAPI, "alice"); !errors.Is(err, session.ErrState) {
		t.Errorf("second Pause() = %v, want ErrState", err)
	}
	if err := s.Resume(ctx, "bob"); err != nil {
		t.Fatalf("Resume() = %v", err)
	}
	waitAdvance(before)
	p := r.waitFor(t, 0, "pause", isOp("pause")).Session
	if p.Reason != "api" || p.Actor != "alice" {
		t.Errorf("pause = %+v, want reason api, actor alice", p)
	}
	if rs := r.waitFor(t, 0, "resume", isOp("resume")).Session; rs.Actor != "bob" {
		t.Errorf("resume actor = %q, want bob", rs.Actor)
	}
	// Terminating a paused session works too.
	if err := s.Pause(ctx, session.PauseAuto, "policy"); err != nil {
		t.Fatalf("Pause() = %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.Terminate(tctx, session.ReasonAPI, event.I32(143)); err != nil {
		t.Fatalf("Terminate(paused) = %v", err)
	}
	if reason, st := s.Result(); reason != "api" || st == nil || *st != 143 {
		t.Errorf("Result() = %q, %v, want api, 143", reason, st)
	}
}

func TestCreateErrors(t *testing.T) {
	r := &recorder{}
	m := newManager(t, r)
	ctx := context.Background()
	s := create(t, m, session.Spec{ID: "dup-1"})
	_ = s
	tests := []struct {
		name string
		spec session.Spec
		want error
	}{
		{"duplicate id", session.Spec{ID: "dup-1"}, session.ErrExists},
		{"path in id", session.Spec{ID: "../x"}, session.ErrInvalidSpec},
		{"dot id", session.Spec{ID: ".."}, session.ErrInvalidSpec},
		{"negative memory", session.Spec{Limits: event.Limits{MemoryBytes: -1}}, session.ErrInvalidSpec},
		{"tiny memory", session.Spec{Limits: event.Limits{MemoryBytes: 4096}}, session.ErrInvalidSpec},
		{"negative cpus", session.Spec{Limits: event.Limits{CPUs: -0.5}}, session.ErrInvalidSpec},
		{"negative net rate", session.Spec{Limits: event.Limits{NetRate: -1}}, session.ErrInvalidSpec},
		{"unknown net rate action", session.Spec{Limits: event.Limits{NetRate: 1 << 20, NetRateAction: "kill"}}, session.ErrInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := m.Create(ctx, tt.spec); !errors.Is(err, tt.want) {
				t.Errorf("Create(%+v) = %v, want %v", tt.spec, err, tt.want)
			}
		})
	}
	if err := s.Cleanup(ctx, session.FSDeleted); !errors.Is(err, session.ErrState) {
		t.Errorf("Cleanup(running) = %v, want ErrState", err)
	}
	if err := s.Pause(ctx, "whim", "x"); !errors.Is(err, session.ErrInvalidSpec) {
		t.Errorf("Pause(whim) = %v, want ErrInvalidSpec", err)
	}
}

// TestV2Only runs sessions with only the v2 hierarchy, as on a pure v2 host
// whose manager got no controllers delegated: identity, start, freeze and
// kill all work through v2 alone, and a limit fails closed.
func TestV2Only(t *testing.T) {
	needRoot(t)
	r := &recorder{}
	host, err := session.NewManager(nil, r.emit, session.WithRoot(t.TempDir()))
	if err != nil {
		t.Skipf("no session manager: %v", err)
	}
	if avail, _ := os.ReadFile(filepath.Join(host.Layout().V2.Path, "cgroup.controllers")); strings.Contains(string(avail), "memory") {
		t.Skip("this host's v2 cgroup has a memory controller; the unavailable path cannot be shown")
	}
	m, err := session.NewManager(nil, r.emit, session.WithRoot(t.TempDir()),
		session.WithLayout(&session.Layout{V2: host.Layout().V2, V1: map[string]session.Dir{}}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	failID := fmt.Sprintf("v2only-%d", os.Getpid())
	if _, err := m.Create(ctx, session.Spec{ID: failID, Limits: event.Limits{MemoryBytes: 64 << 20}}); !errors.Is(err, session.ErrControllerUnavailable) {
		t.Errorf("Create(memory limit, no memory controller) = %v, want ErrControllerUnavailable", err)
	}
	if _, err := os.Stat(filepath.Join(host.Layout().V2.Path, "sandtrail-"+failID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup of the failed Create: Stat() = %v, want removed", err)
	}
	s := create(t, m, session.Spec{})
	cmd := exec.Command("sh", "-c", "cat /proc/self/cgroup > cg.txt; sleep 60")
	if err := s.Start(ctx, cmd); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(s.Workdir(), "cg.txt")); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child never wrote its cgroup")
		}
	}
	if err := s.Pause(ctx, session.PauseAPI, "t"); err != nil {
		t.Fatalf("Pause() = %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(s.CgroupPath(), "cgroup.events")); !strings.Contains(string(b), "frozen 1") {
		t.Errorf("cgroup.events while paused = %q, want frozen 1", b)
	}
	if err := s.Resume(ctx, "t"); err != nil {
		t.Fatalf("Resume() = %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.Terminate(tctx, session.ReasonAPI, nil); err != nil {
		t.Fatalf("Terminate() = %v", err)
	}
	b, err := os.ReadFile(filepath.Join(s.Workdir(), "cg.txt"))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := cgroup.ParseProcCgroup(b)
	if err != nil || !strings.HasSuffix(pc.V2, "/sandtrail-"+s.ID()) {
		t.Errorf("child's v2 cgroup = %q, %v, want …/sandtrail-%s", pc.V2, err, s.ID())
	}
	if reason, st := s.Result(); reason != "api" || st == nil || *st != 137 {
		t.Errorf("Result() = %q, %v, want api, 137", reason, st)
	}
}

// TestSessionNamespaces: a session cannot see or write another session's
// workdir, and holds no copy of the other session's mounts (which would
// keep its filesystem in memory after its cleanup). The sessions root is
// outside every private place here (in /var/lib), as in production, so
// that the mask over it is what hides the other workdir.
func TestSessionNamespaces(t *testing.T) {
	needRoot(t)
	root, err := os.MkdirTemp("/var/lib", "sandtrail-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	r := &recorder{}
	m, err := session.NewManager(hclog.NewNullLogger(), r.emit, session.WithRoot(root), session.WithPollInterval(100*time.Millisecond))
	if err != nil {
		t.Fatalf("NewManager() = %v", err)
	}
	ctx := context.Background()
	a := create(t, m, session.Spec{Limits: event.Limits{DiskBytes: 1 << 20}})
	if err := a.Start(ctx, helperCmd(t, "write", "a.txt", "0")); err != nil {
		t.Fatalf("Start(a) = %v", err)
	}
	b := create(t, m, session.Spec{Limits: event.Limits{DiskBytes: 1 << 20}})
	if err := b.Start(ctx, helperCmd(t, "counter", filepath.Join(a.Workdir(), "from-b"))); err != nil {
		t.Fatalf("Start(b) = %v", err)
	}
	bPid := r.waitFor(t, 0, "b's start", func(e *event.Event) bool { return e.SessionID == b.ID() && isOp("start")(e) }).Proc.Pid
	mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", bPid))
	if err != nil {
		t.Fatalf("reading b's mountinfo: %v", err)
	}
	if strings.Contains(string(mi), " "+a.Workdir()+" ") {
		t.Errorf("b's namespace holds a copy of a's workdir mount:\n%s", mi)
	}
	time.Sleep(200 * time.Millisecond)
	if err := a.Terminate(ctx, session.ReasonAPI, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Cleanup(ctx, session.FSPreserved); err != nil {
		t.Fatalf("Cleanup(a, preserved) = %v", err)
	}
	if _, err := os.Stat(filepath.Join(a.Workdir(), "a.txt")); err != nil {
		t.Errorf("a's preserved workdir: Stat(a.txt) = %v", err)
	}
	if _, err := os.Stat(filepath.Join(a.Workdir(), "from-b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("b wrote into a's workdir: Stat(from-b) = %v, want not exist", err)
	}
}
