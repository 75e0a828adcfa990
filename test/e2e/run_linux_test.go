package e2e

import (
	"bytes"
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
)

// TestRunEcho: a session's processes (argv, cwd, uid, parent, exit codes)
// and its lifecycle events are recorded, shown by timeline, and verify.
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

// TestRunLimits: each limit (memory, timeout, pids, cpu, disk) gives its
// limit.hit and the session's end reason.
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
