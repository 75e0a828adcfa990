package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/test/netns"
)

// helperEnv makes the test binary act as a small workload instead of
// running tests (see runHelper).
const helperEnv = "SANDTRAIL_E2E_HELPER"

var (
	// bin is the sandtrail binary built for these tests; helper is a copy
	// of the test binary that the agent user may execute; shimDir holds
	// sandtrail-shim, built for these tests, linked as each manager, and
	// every session's PATH starts with it.
	bin, helper, shimDir string
	buildErr             error
	skipReason           string
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	os.Exit(setup(m))
}

func setup(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sandtrail-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	switch {
	case os.Geteuid() != 0:
		skipReason = "needs root: sessions need their own cgroups and the collector loads BPF programs"
	default:
		if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
			skipReason = "needs BTF (/sys/kernel/btf/vmlinux) for the eBPF collector"
		}
	}
	if skipReason == "" {
		_ = os.Chmod(dir, 0o711)
		bin = filepath.Join(dir, "sandtrail")
		if prebuilt := os.Getenv("SANDTRAIL_E2E_BIN"); prebuilt != "" {
			// Test a binary built elsewhere (an installed one, say).
			buildErr = copyFile(prebuilt, bin, 0o755)
		} else {
			cmd := exec.Command("go", "build", "-o", bin, "github.com/sandtrail/sandtrail/cmd/sandtrail")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("building sandtrail: %v\n%s", err, out)
			}
		}
		shimDir = filepath.Join(dir, "shims")
		buildErr = errors.Join(buildErr, buildShims(dir, shimDir))
		helper = filepath.Join(dir, "helper")
		if err := copyFile(os.Args[0], helper, 0o755); err != nil {
			buildErr = errors.Join(buildErr, err)
		}
	}
	return m.Run()
}

// throttled reports whether cpu.stat of this process's cpu cgroup (v1
// or v2) counts throttled time.
func throttled() bool {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dirs []string
		switch {
		case slices.Contains(strings.Split(parts[1], ","), "cpu"):
			dirs = []string{"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}
		case parts[0] == "0":
			dirs = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}
		}
		for _, d := range dirs {
			st, err := os.ReadFile(filepath.Join(d, parts[2], "cpu.stat"))
			if err != nil {
				continue
			}
			// The throttled time, which the session reports, not
			// nr_throttled: the kernel adds a period's throttled time
			// only when the period ends, so a process that stops at the
			// first throttle can end before any time was counted.
			for _, l := range strings.Split(string(st), "\n") {
				for _, key := range []string{"throttled_time ", "throttled_usec "} {
					if v, ok := strings.CutPrefix(l, key); ok && v != "0" {
						return true
					}
				}
			}
		}
	}
	return false
}

// helperCmd is the command line that runs the helper in mode, through
// env(1) because a session's command gets run's environment.
func helperCmd(mode string, args ...string) []string {
	return append([]string{"/usr/bin/env", helperEnv + "=" + mode, helper}, args...)
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

// runHelper is a workload run inside sessions.
func runHelper(mode string, args []string) int {
	switch mode {
	case "alloc": // alloc MiB: allocate and touch MiB mebibytes, then hold them
		n, _ := strconv.Atoi(args[0])
		var keep [][]byte
		for range n {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		time.Sleep(time.Second)
		return len(keep) & 0
	case "busy": // busy: spin until the cgroup's cpu.stat shows throttling
		x := 0
		for !throttled() {
			for i := range 1 << 20 {
				x += i
			}
		}
		return x & 0
	case "counter": // counter FILE: write an increasing count every 10 ms
		for i := 1; ; i++ {
			_ = os.WriteFile(args[0]+".tmp", []byte(strconv.Itoa(i)), 0o644)
			_ = os.Rename(args[0]+".tmp", args[0])
			time.Sleep(10 * time.Millisecond)
		}
	case "forkloop": // forkloop N: start N sleeping children, ignoring failures
		n, _ := strconv.Atoi(args[0])
		var cmds []*exec.Cmd
		fails := 0
		for range n {
			c := exec.Command("/bin/sleep", "3")
			if err := c.Start(); err != nil {
				fails++
				continue
			}
			cmds = append(cmds, c)
		}
		for _, c := range cmds {
			_ = c.Wait()
		}
		fmt.Printf("started %d, failed %d\n", len(cmds), fails)
		return 0
	case "storm": // storm SECONDS DIR: execs and file creates for SECONDS (loss_linux_test.go)
		return helperStorm(args)
	case "disk": // disk MiB: write MiB mebibytes into the workdir, then wait
		n, _ := strconv.Atoi(args[0])
		f, err := os.Create("fill")
		if err != nil {
			return 2
		}
		buf := bytes.Repeat([]byte{'x'}, 1<<20)
		for range n {
			if _, err := f.Write(buf); err != nil {
				return 3
			}
		}
		f.Sync()
		time.Sleep(30 * time.Second)
		return 0
	}
	if h, ok := helpers[mode]; ok {
		return h(args)
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

// helpers are more helper modes, registered by the test files that use them
// (in init), so that each file keeps its own workloads.
var helpers = map[string]func(args []string) int{}

// env is one sandtrail installation: a data directory with a key and its
// own sockets.
type env struct {
	t    *testing.T
	data string
	sock string
	// ns, when set (newNetEnv), is the network namespace that every
	// sandtrail process of the env runs in, with the servers the test
	// starts for it (e.do).
	ns *netns.NS
	// env is added to every sandtrail command's environment.
	env []string
}

// newNetEnv is newEnv for tests whose sessions dial or send to addresses
// off this machine: sandtrail, its sessions and the test's servers for
// them run in a network namespace of the test's own, and nothing they
// send can leave it.
func newNetEnv(t *testing.T) *env {
	e := newEnv(t)
	e.ns = netns.New(t)
	return e
}

// start starts c, a command of e.cmd's, in e's namespace if it has one.
func (e *env) start(c *exec.Cmd) error {
	if e.ns != nil {
		return e.ns.Start(c)
	}
	return c.Start()
}

// do calls f in e's namespace if it has one: the servers f starts listen
// there.
func (e *env) do(f func()) {
	if e.ns != nil {
		e.ns.Do(f)
		return
	}
	f()
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	data, err := os.MkdirTemp("", "sandtrail-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	// The agent must be able to reach its workdir beneath the data dir.
	if err := os.Chmod(data, 0o711); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, data: data, sock: filepath.Join(data, "run", "ingest.sock")}
	if out, err := e.cmd("keys", "generate").CombinedOutput(); err != nil {
		t.Fatalf("sandtrail keys generate: %v\n%s", err, out)
	}
	return e
}

func (e *env) cmd(args ...string) *exec.Cmd {
	c := exec.Command(bin, append([]string{"--data", e.data}, args...)...)
	c.Env = append(append(os.Environ(), "SANDTRAIL_SOCKET="+e.sock, "SANDTRAIL_LOG_LEVEL=warn", "SANDTRAIL_SHIM_DIR="+shimDir), e.env...)
	return c
}

// result is what one `sandtrail run` did.
type result struct {
	code    int
	stdout  string
	stderr  string
	summary summary
}

// summary is the part of run's JSON summary the tests read.
type summary struct {
	SessionID  string            `json:"session_id"`
	HostedBy   string            `json:"hosted_by"`
	Reason     string            `json:"reason"`
	ExitStatus *int32            `json:"exit_status"`
	ByCategory map[string]uint64 `json:"by_category"`
	Limits     []string          `json:"limit_hits"`
	Lost       uint64            `json:"lost"`
	Workdir    string            `json:"workdir"`
	Journal    struct {
		Status string `json:"status"`
	} `json:"journal"`
}

// run runs `sandtrail run --format json ARGS...` and parses the summary.
func (e *env) run(args ...string) result {
	e.t.Helper()
	r, err := e.tryRun(args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// ran is the outcome of a `sandtrail run` in the background.
type ran struct {
	r   result
	err error
}

// startRun starts `sandtrail run ARGS...` (tryRun) in a goroutine and
// returns the channel its outcome arrives on.
func (e *env) startRun(args ...string) <-chan ran {
	done := make(chan ran, 1)
	go func() {
		r, err := e.tryRun(args...)
		done <- ran{r, err}
	}()
	return done
}

// tryRun is run for goroutines other than the test's.
func (e *env) tryRun(args ...string) (result, error) {
	c := e.cmd(append([]string{"run", "--format", "json"}, args...)...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := e.start(c)
	if err == nil {
		err = c.Wait()
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		return r, fmt.Errorf("sandtrail run: %v", err)
	}
	i := strings.LastIndex(r.stderr, "{\n  \"session_id\"")
	if i < 0 {
		return r, fmt.Errorf("sandtrail run %q: exit %d, no summary on stderr:\n%s", args, r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stderr[i:]), &r.summary); err != nil {
		return r, fmt.Errorf("decoding run summary: %v\n%s", err, r.stderr[i:])
	}
	return r, nil
}

// events reads a session's events back with `sandtrail query`; an empty
// id reads every event.
func (e *env) events(id string) []*event.Event {
	e.t.Helper()
	args := []string{"query", "--format", "jsonl"}
	if id != "" {
		args = append(args, "--session", id)
	}
	c := e.cmd(args...)
	out, err := c.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			e.t.Fatalf("sandtrail query: %v\n%s", err, ee.Stderr)
		}
		e.t.Fatalf("sandtrail query: %v", err)
	}
	var evs []*event.Event
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 1<<20), event.MaxEncodedSize*2)
	for sc.Scan() {
		ev, err := event.Unmarshal(sc.Bytes())
		if err != nil {
			e.t.Fatalf("query output line: %v\n%s", err, sc.Bytes())
		}
		evs = append(evs, ev)
	}
	if err := sc.Err(); err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// inWorkdirs returns name in each session workdir of e, for files that
// pass between the test and a running agent: a session's /tmp is private,
// and the workdir is the one place that both see live.
func (e *env) inWorkdirs(name string) []string {
	ws, _ := filepath.Glob(filepath.Join(e.data, "sessions", "*", "work"))
	for i, w := range ws {
		ws[i] = filepath.Join(w, name)
	}
	return ws
}

// release creates name in each session workdir of e (inWorkdirs).
func (e *env) release(name string) {
	for _, p := range e.inWorkdirs(name) {
		_ = os.WriteFile(p, nil, 0o644)
	}
}

// verify runs `sandtrail verify` and fails the test unless it passes.
func (e *env) verify() {
	e.t.Helper()
	if out, err := e.cmd("verify").CombinedOutput(); err != nil {
		e.t.Errorf("sandtrail verify: %v\n%s", err, out)
	}
}

func kinds(evs []*event.Event, kind string) []*event.Event {
	var out []*event.Event
	for _, ev := range evs {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func terminate(t *testing.T, evs []*event.Event) *event.Session {
	t.Helper()
	ts := kinds(evs, "session.terminate")
	if len(ts) != 1 {
		t.Fatalf("session.terminate events = %d, want 1", len(ts))
	}
	return ts[0].Session
}

func limitHits(evs []*event.Event, typ string) []*event.Event {
	var out []*event.Event
	for _, ev := range kinds(evs, "limit.hit") {
		if ev.Limit.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func nobodyUID(t *testing.T) uint32 {
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("needs the user nobody: %v", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	return uint32(uid)
}

// TestRunEcho is the first "done means" of issue 4.
func TestRunEcho(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	uid := nobodyUID(t)
	r := e.run("--user", "nobody", "--", "sh", "-c", `cd /tmp && /bin/echo a "b c" >/dev/null; exit 7`)
	if r.code != 7 {
		t.Errorf("sandtrail run exit code = %d, want 7\n%s", r.code, r.stderr)
	}
	s := r.summary
	if s.Reason != "normal" || s.ExitStatus == nil || *s.ExitStatus != 7 || s.HostedBy != "this process" || s.Journal.Status != "intact" {
		t.Errorf("summary = %+v, want normal, 7, hosted by this process, journal intact", s)
	}
	evs := e.events(s.SessionID)
	var sh, echo *event.Proc
	for _, ev := range kinds(evs, "process.exec") {
		switch {
		case slices.Equal(ev.Proc.Argv, []string{"/bin/echo", "a", "b c"}):
			echo = ev.Proc
		case len(ev.Proc.Argv) > 0 && ev.Proc.Argv[0] == "sh":
			sh = ev.Proc
		}
	}
	if sh == nil || echo == nil {
		t.Fatalf("exec events of sh and /bin/echo a \"b c\" not both found in %d events", len(evs))
	}
	if echo.Cwd != "/tmp" {
		t.Errorf("echo cwd = %q, want /tmp", echo.Cwd)
	}
	for _, p := range []*event.Proc{sh, echo} {
		if p.UID == nil || *p.UID != uid {
			t.Errorf("%s uid = %v, want %d", p.Argv[0], p.UID, uid)
		}
	}
	if echo.PPid != sh.Pid {
		t.Errorf("echo ppid = %d, want sh's pid %d", echo.PPid, sh.Pid)
	}
	exits := map[int32]int32{}
	for _, ev := range kinds(evs, "process.exit") {
		if ev.Proc.ExitCode != nil {
			exits[ev.Proc.Pid] = *ev.Proc.ExitCode
		}
	}
	if c, ok := exits[echo.Pid]; !ok || c != 0 {
		t.Errorf("echo exit = %d (recorded %v), want 0", c, ok)
	}
	if c, ok := exits[sh.Pid]; !ok || c != 7 {
		t.Errorf("sh exit = %d (recorded %v), want 7", c, ok)
	}
	term := terminate(t, evs)
	if term.Reason != "normal" || term.ExitStatus == nil || *term.ExitStatus != 7 {
		t.Errorf("session.terminate = reason %q exit %v, want normal 7", term.Reason, term.ExitStatus)
	}
	for _, op := range []string{"session.create", "session.start", "session.cleanup"} {
		if n := len(kinds(evs, op)); n != 1 {
			t.Errorf("%s events = %d, want 1", op, n)
		}
	}
	out, err := e.cmd("timeline", s.SessionID).Output()
	if err != nil {
		t.Fatalf("sandtrail timeline: %v", err)
	}
	if !strings.Contains(string(out), "/bin/echo a 'b c'  cwd=/tmp") || !strings.Contains(string(out), "exit 7") {
		t.Errorf("timeline lacks the echo line or sh's exit 7:\n%s", out)
	}
	e.verify()
}

// TestRunArgvTruncated: a 100 KiB argv is recorded cut, its first 32 KiB
// intact.
func TestRunArgvTruncated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	args := []string{"/bin/true"}
	total := len("/bin/true") + 1
	for i := 0; total < 100<<10; i++ {
		a := strings.Repeat(string(rune('a'+i%26)), 1+(i*37)%900)
		args = append(args, a)
		total += len(a) + 1
	}
	r := e.run(append([]string{"--user", "nobody", "--"}, args...)...)
	if r.code != 0 {
		t.Fatalf("sandtrail run exit code = %d, want 0\n%s", r.code, r.stderr)
	}
	var p *event.Proc
	for _, ev := range kinds(e.events(r.summary.SessionID), "process.exec") {
		if len(ev.Proc.Argv) > 0 && ev.Proc.Argv[0] == "/bin/true" {
			p = ev.Proc
		}
	}
	if p == nil {
		t.Fatal("no exec event of /bin/true")
	}
	if !p.ArgvTruncated {
		t.Error("argv_truncated = false, want true")
	}
	const max = 32 << 10
	full := strings.Join(args, "\x00") + "\x00"
	got := strings.Join(p.Argv, "\x00")
	if len(got) < max-1 || !strings.HasPrefix(full, got) || got != strings.TrimSuffix(full[:max], "\x00") {
		t.Errorf("recorded argv = %d bytes, want the first %d bytes of the real %d intact", len(got), max, len(full))
	}
	e.verify()
}

// TestRunLimits: each limit of issue 4 gives its limit.hit and the
// session's end reason.
func TestRunLimits(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		limit  string
		reason string
		check  func(t *testing.T, hit *event.Event, evs []*event.Event)
	}{
		{
			name: "memory", args: append([]string{"--memory", "64M", "--"}, helperCmd("alloc", "512")...),
			limit: "memory_oom", reason: "oom",
			check: func(t *testing.T, hit *event.Event, evs []*event.Event) {
				start := kinds(evs, "session.start")
				if len(start) != 1 || start[0].Proc == nil {
					t.Fatal("no session.start with the main process")
				}
				if hit.Proc == nil || hit.Proc.Pid != start[0].Proc.Pid {
					t.Errorf("memory_oom proc = %+v, want the allocating main process %d", hit.Proc, start[0].Proc.Pid)
				}
				if hit.Limit.Configured != 64<<20 || hit.Limit.Measured <= 0 || hit.Limit.Action != "kill" {
					t.Errorf("memory_oom = %+v, want configured %d, a measured value and action kill", hit.Limit, 64<<20)
				}
			},
		},
		{
			name: "timeout", args: []string{"--timeout", "2s", "--", "sleep", "60"},
			limit: "timeout", reason: "timeout",
			check: func(t *testing.T, hit *event.Event, _ []*event.Event) {
				if hit.Limit.Configured != 2000 || hit.Limit.Action != "kill" {
					t.Errorf("timeout = %+v, want configured 2000 ms, action kill", hit.Limit)
				}
			},
		},
		{
			name: "pids", args: append([]string{"--pids", "64", "--timeout", "60s", "--"}, helperCmd("forkloop", "200")...),
			limit: "pids", reason: "normal",
			check: func(t *testing.T, hit *event.Event, evs []*event.Event) {
				if hit.Limit.Configured != 64 {
					t.Errorf("pids = %+v, want configured 64", hit.Limit)
				}
				// Contained: the record never shows more than 64 live
				// processes in the session.
				live, peak := 0, 0
				for _, ev := range evs {
					switch ev.Kind {
					case "process.fork":
						live++
					case "process.exit":
						live--
					}
					peak = max(peak, live)
				}
				if peak > 64 {
					t.Errorf("peak live processes in the record = %d, want at most 64", peak)
				}
			},
		},
		{
			name: "cpu", args: append([]string{"--cpus", "0.2", "--timeout", "60s", "--"}, helperCmd("busy")...),
			limit: "cpu_throttle", reason: "normal",
			check: func(t *testing.T, hit *event.Event, _ []*event.Event) {
				if hit.Limit.Measured <= 0 || hit.Limit.Action != "throttle" {
					t.Errorf("cpu_throttle = %+v, want a throttled time and action throttle", hit.Limit)
				}
			},
		},
		{
			name: "disk", args: append([]string{"--disk", "1M", "--timeout", "60s", "--"}, helperCmd("disk", "4")...),
			// The kernel refuses the write (the helper exits 3) and the
			// session ends normally.
			limit: "disk_quota", reason: "normal",
			check: func(t *testing.T, hit *event.Event, _ []*event.Event) {
				if hit.Limit.Configured != 1<<20 || hit.Limit.Measured < 1<<20-4096 || hit.Limit.Action != "throttle" {
					t.Errorf("disk_quota = %+v, want configured %d, as much measured, action throttle", hit.Limit, 1<<20)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			r := e.run(append([]string{"--user", "nobody"}, tt.args...)...)
			evs := e.events(r.summary.SessionID)
			hits := limitHits(evs, tt.limit)
			if len(hits) == 0 {
				t.Fatalf("no %s limit.hit in %d events; summary %+v\n%s", tt.limit, len(evs), r.summary, r.stderr)
			}
			tt.check(t, hits[0], evs)
			if term := terminate(t, evs); term.Reason != tt.reason {
				t.Errorf("session.terminate reason = %q, want %q", term.Reason, tt.reason)
			}
			if r.summary.Reason != tt.reason || len(r.summary.Limits) == 0 {
				t.Errorf("summary = %+v, want reason %q and its limit hits", r.summary, tt.reason)
			}
			if s := r.summary.ExitStatus; s == nil || int(*s) != r.code {
				t.Errorf("sandtrail run exit code = %d, want the session's exit status %v", r.code, s)
			}
			e.verify()
		})
	}
}

// TestRunExecStorm: 20k fork+exec of /bin/true in one session are all
// recorded, or every missing one is accounted for by collector.loss.
func TestRunExecStorm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 20000
	r := e.run("--user", "nobody", "--", "sh", "-c",
		fmt.Sprintf(`i=0; while [ $i -lt %d ]; do /bin/true; i=$((i+1)); done`, n))
	if r.code != 0 {
		t.Fatalf("sandtrail run exit code = %d, want 0\n%s", r.code, r.stderr)
	}
	// This journal holds only this session: read everything, host-wide
	// losses (no session) too.
	count := map[string]uint64{}
	lost := map[string]uint64{}
	var own uint64 // the session's own losses
	for _, ev := range e.events("") {
		// Host-wide events have no session: losses, and the collector's
		// capabilities that every start writes first.
		if ev.SessionID != r.summary.SessionID && !(ev.SessionID == "" && (ev.Loss != nil || ev.Kernel != nil)) {
			t.Fatalf("event of another session in this data dir: %+v", ev)
		}
		switch ev.Kind {
		case "process.exec", "process.exit":
			count[ev.Kind]++
		case "collector.loss":
			lost[ev.Loss.LostKind] += ev.Loss.Count
			if ev.SessionID != "" {
				own += ev.Loss.Count
			}
		}
	}
	// query --session S --kind collector.loss sums to what run reports.
	var queried uint64
	for _, ev := range e.events(r.summary.SessionID) {
		if ev.Kind == "collector.loss" {
			queried += ev.Loss.Count
		}
	}
	if queried != r.summary.Lost || own != r.summary.Lost {
		t.Errorf("the session's collector.loss events sum to %d (query --session) and %d, run reported lost %d", queried, own, r.summary.Lost)
	}
	// sh itself plus n runs of /bin/true.
	const want = n + 1
	if lost[""] == 0 {
		for _, k := range []string{"process.exec", "process.exit"} {
			if count[k]+lost[k] != want {
				t.Errorf("%s: recorded %d + lost %d = %d, want exactly %d", k, count[k], lost[k], count[k]+lost[k], want)
			}
		}
	} else if got := count["process.exec"] + count["process.exit"] + lost["process.exec"] + lost["process.exit"] + lost[""]; got != 2*want {
		t.Errorf("exec+exit recorded %v + lost %v = %d, want exactly %d", count, lost, got, 2*want)
	}
	t.Logf("exec storm: recorded %v, lost %v", count, lost)
	e.verify()
}

// TestRunDefaultUser: without --user, run uses sandtrail-agent, under a
// uid of the session's own (0x5a000000+n) with the agent's name and group,
// and says how to get it when it is missing.
func TestRunDefaultUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if u, err := user.Lookup("sandtrail-agent"); err == nil {
		r := e.run("--", "sh", "-c", "id -un; id -g; id -u")
		got := strings.Fields(r.stdout)
		if r.code != 0 || len(got) != 3 || got[0] != "sandtrail-agent" || got[1] != u.Gid {
			t.Fatalf("id -un, -g, -u in session %s = %q (exit %d), want sandtrail-agent, %s and the session's uid", r.summary.SessionID, r.stdout, r.code, u.Gid)
		}
		if uid, err := strconv.ParseUint(got[2], 10, 32); err != nil || uid < 0x5a000000 || uid >= 0x5a000000+65536 || got[2] == u.Uid {
			t.Errorf("id -u in session %s = %s, want a uid of the session's own, 0x5a000000+n", r.summary.SessionID, got[2])
		}
		return
	}
	out, err := e.cmd("run", "--", "true").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("sandtrail run without sandtrail-agent: %v, want exit 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "install.sh") || !strings.Contains(string(out), "--user") {
		t.Errorf("sandtrail run without sandtrail-agent says %q, want it to name install.sh and --user", out)
	}
}

// TestDaemonSessions: with a daemon running, run goes through it;
// `sandtrail session pause/resume` freeze and thaw the session, recorded
// with their actor; and create, start (detached), show and cleanup work.
func TestDaemonSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.cmd("daemon")
	var dlog bytes.Buffer
	d.Stdout, d.Stderr = &dlog, &dlog
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	daemonDone := make(chan error, 1)
	go func() { daemonDone <- d.Wait() }()
	stopDaemon := func() {
		if d.ProcessState == nil {
			_ = d.Process.Signal(syscall.SIGTERM)
		}
		select {
		case err := <-daemonDone:
			if err != nil {
				t.Errorf("daemon: %v\n%s", err, dlog.String())
			}
		case <-time.After(60 * time.Second):
			_ = d.Process.Kill()
			t.Errorf("daemon did not stop on SIGTERM\n%s", dlog.String())
		}
	}
	defer func() {
		if d.ProcessState == nil {
			stopDaemon()
		}
	}()
	ctl := filepath.Join(filepath.Dir(e.sock), "control.sock")
	waitFor(t, "the control socket", func() bool { _, err := os.Stat(ctl); return err == nil })

	// run through the daemon, in the background.
	runDone := e.startRun(append([]string{"--user", "nobody", "--"}, helperCmd("counter", "count")...)...)

	var id, workdir string
	waitFor(t, "a running session", func() bool {
		out, err := e.cmd("session", "list", "--format", "json").Output()
		if err != nil {
			return false
		}
		var ss []struct{ ID, State, Workdir string }
		if json.Unmarshal(out, &ss) != nil || len(ss) != 1 || ss[0].State != "running" {
			return false
		}
		id, workdir = ss[0].ID, ss[0].Workdir
		return true
	})
	count := filepath.Join(workdir, "count")
	read := func() int {
		b, _ := os.ReadFile(count)
		n, _ := strconv.Atoi(string(b))
		return n
	}
	waitFor(t, "the counter to count", func() bool { return read() > 0 })
	if out, err := e.cmd("session", "pause", id).CombinedOutput(); err != nil {
		t.Fatalf("sandtrail session pause: %v\n%s", err, out)
	}
	before := read()
	time.Sleep(500 * time.Millisecond) // 50 counts if it were running
	if after := read(); after != before {
		t.Errorf("counter went from %d to %d while paused", before, after)
	}
	if out, err := e.cmd("session", "resume", id).CombinedOutput(); err != nil {
		t.Fatalf("sandtrail session resume: %v\n%s", err, out)
	}
	waitFor(t, "the counter to count again", func() bool { return read() > before })
	if out, err := e.cmd("session", "stop", id).CombinedOutput(); err != nil {
		t.Fatalf("sandtrail session stop: %v\n%s", err, out)
	}
	rr := <-runDone
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	r := rr.r
	if r.summary.SessionID != id || r.summary.HostedBy != "daemon" || r.summary.Reason != "api" {
		t.Errorf("run summary = %+v, want session %s hosted by daemon, reason api", r.summary, id)
	}
	if r.code != 137 {
		t.Errorf("sandtrail run exit code = %d, want 137 (SIGKILL)", r.code)
	}

	// create, start (detached, output to the session's log files),
	// cleanup.
	out, err := e.cmd("session", "create", "--user", "nobody", "--timeout", "60s").Output()
	if err != nil {
		t.Fatalf("sandtrail session create: %v", err)
	}
	id2 := strings.TrimSpace(string(out))
	if out, err := e.cmd("session", "start", id2, "--", "sh", "-c", "echo out; echo err >&2; exit 3").CombinedOutput(); err != nil {
		t.Fatalf("sandtrail session start: %v\n%s", err, out)
	}
	var shown struct {
		State      string
		ExitStatus *int32 `json:"exit_status"`
		Reason     string
	}
	waitFor(t, "the started session to end", func() bool {
		out, err := e.cmd("session", "show", id2, "--format", "json").Output()
		return err == nil && json.Unmarshal(out, &shown) == nil && shown.State == "terminated"
	})
	if shown.Reason != "normal" || shown.ExitStatus == nil || *shown.ExitStatus != 3 {
		t.Errorf("session show = %+v, want normal, exit status 3", shown)
	}
	dir := filepath.Join(e.data, "sessions", id2)
	for name, want := range map[string]string{"stdout.log": "out\n", "stderr.log": "err\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v, want %q", name, b, err, want)
		}
	}
	if out, err := e.cmd("session", "cleanup", id2, "--keep", "deleted").CombinedOutput(); err != nil || !strings.Contains(string(out), "cleaned") {
		t.Errorf("sandtrail session cleanup: %v\n%s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("session directory after cleanup --keep deleted: %v, want it gone", err)
	}
	stopDaemon()
	evs2 := e.events(id2)
	if term := terminate(t, evs2); term.Reason != "normal" || term.ExitStatus == nil || *term.ExitStatus != 3 {
		t.Errorf("session.terminate = %+v, want normal 3", term)
	}
	if c := kinds(evs2, "session.cleanup"); len(c) != 1 || c[0].Session.FSState != "deleted" {
		t.Errorf("session.cleanup events = %d, want 1 with fs_state deleted", len(c))
	}
	evs := e.events(id)
	for _, k := range []string{"session.pause", "session.resume"} {
		got := kinds(evs, k)
		if len(got) != 1 || got[0].Session.Actor != "root (uid 0)" {
			t.Errorf("%s events = %d (actor %v), want 1 with actor root (uid 0)", k, len(got), actors(got))
		}
	}
	if p := kinds(evs, "session.pause"); len(p) == 1 && p[0].Session.Reason != "api" {
		t.Errorf("session.pause reason = %q, want api", p[0].Session.Reason)
	}
	e.verify()
}

func actors(evs []*event.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Session.Actor)
	}
	return out
}

// waitBound is how long the tests wait for a daemon, a socket or a file to
// appear: a bound on a broken system, not on speed. Each daemon and run
// loads the BPF programs (seconds of verifier time), and the tests run in
// parallel on as few as 2 cores.
const waitBound = 3 * time.Minute

// waitFor polls cond until it holds, failing after waitBound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: gave up after %v", what, waitBound)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestRunSessionEnv: the session's environment is built, not inherited.
// With run's PATH starting with a directory the agent cannot reach (as
// root's pyenv shims are), `python3` resolves to the system's; run's other
// variables (a token) stay out, the allowlist and --env come in; a command
// the agent cannot run fails before it starts, naming the path.
func TestRunSessionEnv(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	closed, err := os.MkdirTemp("", "sandtrail-e2e-rootpath-") // 0700, root's
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(closed)
	if err := os.WriteFile(filepath.Join(closed, "python3"), []byte("#!/bin/sh\necho fake\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "PATH="+closed+":"+os.Getenv("PATH"), "API_TOKEN=secret", "TERM=xterm-e2e")
	r := e.run("--user", "nobody", "--", "python3", "-c", "print(1)")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "1" {
		t.Errorf("run -- python3 -c 'print(1)' with an unreachable PATH entry first: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	r = e.run("--user", "nobody", "--env", "FOO=bar", "--", "sh", "-c", `echo "path=$PATH"; echo "token=${API_TOKEN-unset}"; echo "foo=$FOO"; echo "term=$TERM"`)
	for _, want := range []string{"path=" + shimDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"token=unset", "foo=bar", "term=xterm-e2e"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("session environment lacks %q:\n%s", want, r.stdout)
		}
	}
	r = e.run("--user", "nobody", "--", filepath.Join(closed, "python3"))
	if r.code != 126 || !strings.Contains(r.stderr, closed) {
		t.Errorf("a command the agent cannot run: exit %d, want 126 and an error naming %s\n%s", r.code, closed, r.stderr)
	}
}
