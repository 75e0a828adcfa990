package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/sandtrail/sandtrail/record/event"
)

func TestLimitFlags(t *testing.T) {
	base := event.Limits{MemoryBytes: 1 << 30, CPUs: 2, Pids: 1024, TimeoutMS: 3600_000, DiskBytes: 1 << 34}
	tests := []struct {
		name    string
		args    []string
		want    event.Limits
		wantErr string
	}{
		{name: "no flags keep the policy's", want: base},
		{name: "each flag overrides one", args: []string{"--memory", "64M", "--cpus", "500m", "--pids", "64", "--timeout", "2s", "--disk", "1G"},
			want: event.Limits{MemoryBytes: 64 << 20, CPUs: 0.5, Pids: 64, TimeoutMS: 2000, DiskBytes: 1 << 30}},
		{name: "zero is unlimited", args: []string{"--memory", "0"}, want: event.Limits{CPUs: 2, Pids: 1024, TimeoutMS: 3600_000, DiskBytes: 1 << 34}},
		{name: "bad memory", args: []string{"--memory", "lots"}, wantErr: "--memory"},
		{name: "bad timeout", args: []string{"--timeout", "soon"}, wantErr: "--timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l limitFlags
			f := pflag.NewFlagSet("x", pflag.ContinueOnError)
			l.bind(f)
			if err := f.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			got, err := l.apply(base, f)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("apply(%q) = %v, want an error naming %s", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("apply(%q) = %+v, %v, want %+v", tt.args, got, err, tt.want)
			}
		})
	}
}

func TestCheckKeep(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{name: "default", in: "", want: "preserved", ok: true},
		{name: "snapshot", in: "snapshot", want: "snapshot", ok: true},
		{name: "deleted", in: "deleted", want: "deleted", ok: true},
		{name: "unknown", in: "shredded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkKeep(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("checkKeep(%q) = %q, %v, want %q (ok %v)", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestCommandEnv(t *testing.T) {
	in := []string{"PATH=/opt/bin:/usr/bin", "HOME=/root", "USER=root", "SUDO_USER=alice", "TERM=xterm", "API_KEY=k"}
	got := commandEnv(in, "/w", account{Name: "agent", UID: 5}, "s1")
	want := []string{"PATH=/opt/bin:/usr/bin", "TERM=xterm", "API_KEY=k", "HOME=/w", "USER=agent", "LOGNAME=agent", "PWD=/w", "SANDTRAIL_SESSION_ID=s1"}
	if !slices.Equal(got, want) {
		t.Errorf("commandEnv() = %q, want %q", got, want)
	}
	if got := commandEnv(nil, "/w", account{Name: "a"}, "s"); !slices.Contains(got, "PATH=/usr/local/bin:/usr/bin:/bin") {
		t.Errorf("commandEnv(nil) = %q, want a default PATH", got)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=/nonexistent:" + dir}
	tests := []struct {
		name, in, want string
		notFound       bool
	}{
		{name: "found on PATH", in: "tool", want: exe},
		{name: "with a slash, as is", in: "./x/y", want: "./x/y"},
		{name: "not executable", in: "data", notFound: true},
		{name: "missing", in: "nope", notFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lookPath(tt.in, env)
			if tt.notFound {
				if err == nil || exitStatusOf(err) != 127 {
					t.Errorf("lookPath(%q) = %q, %v, want a not-found error (status 127)", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("lookPath(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestReachable(t *testing.T) {
	dir, err := os.MkdirTemp("", "reachable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	inner := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	for p := filepath.Dir(dir); p != "/"; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not searchable by others; cannot test from here", p)
		}
	}
	nobody := account{Name: "nobody", UID: 65534, GID: 65534}
	if err := reachable(inner, nobody); err != nil {
		t.Errorf("reachable(%s) = %v, want nil", inner, err)
	}
	if err := os.Chmod(filepath.Join(dir, "a"), 0o750); err != nil {
		t.Fatal(err)
	}
	err = reachable(inner, nobody)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "a")) {
		t.Errorf("reachable(%s) with a 0750 parent = %v, want an error naming it", inner, err)
	}
	if err := reachable(inner, account{Name: "root"}); err != nil {
		t.Errorf("reachable() as root = %v, want nil", err)
	}
}

func TestShellJoin(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{name: "plain", argv: []string{"/bin/echo", "a"}, want: "/bin/echo a"},
		{name: "space and quote", argv: []string{"echo", "b c", "it's"}, want: `echo 'b c' 'it'\''s'`},
		{name: "empty arg", argv: []string{"x", ""}, want: "x ''"},
		{name: "control characters", argv: []string{"a\x1b[31m"}, want: `'a\x1b[31m'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shellJoin(tt.argv, 160); got != tt.want {
				t.Errorf("shellJoin(%q) = %q, want %q", tt.argv, got, tt.want)
			}
		})
	}
}

// TestTimeline builds a tree from a real journal and index: children
// under parents by ppid, a recycled pid as a new process, lifecycle steps
// in order.
func TestTimeline(t *testing.T) {
	data := t.TempDir()
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	n := 0
	mk := func(kind string, src event.Source, f func(*event.Event)) *event.Event {
		n++
		e := &event.Event{V: event.SchemaVersion, TS: t0.Add(time.Duration(n) * time.Millisecond), SessionID: "S", Kind: kind, Source: src}
		f(e)
		return e
	}
	start := func(pid int32) time.Time { return t0.Add(time.Duration(pid) * time.Microsecond) }
	proc := func(kind string, pid, ppid int32, argv []string, code *int32) *event.Event {
		return mk(kind, event.SourceKernel, func(e *event.Event) {
			e.Proc = &event.Proc{Pid: pid, PPid: ppid, Argv: argv, UID: event.U32(1000), Cwd: "/w", ExitCode: code, StartTS: start(pid)}
		})
	}
	evs := []*event.Event{
		mk("session.create", event.SourceSession, func(e *event.Event) { e.Session = &event.Session{Op: "create", User: "agent"} }),
		proc("process.fork", 10, 1, nil, nil),
		proc("process.exec", 10, 1, []string{"sh", "-c", "x"}, nil),
		proc("process.fork", 11, 10, nil, nil),
		proc("process.exec", 11, 10, []string{"/bin/echo", "a", "b c"}, nil),
		proc("process.exit", 11, 10, nil, event.I32(0)),
		mk("limit.hit", event.SourceSession, func(e *event.Event) {
			e.Limit = &event.Limit{Type: "pids", Measured: 64, Configured: 64, Unit: "count", Action: "throttle"}
		}),
		proc("process.fork", 12, 10, nil, nil),
		proc("process.exec", 12, 10, []string{"true"}, nil),
		proc("process.exit", 12, 10, nil, event.I32(0)),
		proc("process.exit", 10, 1, nil, event.I32(7)),
		mk("session.terminate", event.SourceSession, func(e *event.Event) {
			e.Session = &event.Session{Op: "terminate", Reason: "normal", ExitStatus: event.I32(7)}
		}),
		mk("process.exec", event.SourceKernel, func(e *event.Event) {
			e.Proc = &event.Proc{Pid: 99, Argv: []string{"other"}}
			e.SessionID = "T"
		}),
	}
	queryFixture(t, data, evs)
	cfg := &Config{DataDir: data}
	ix, err := openIndex(t.Context(), cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	tl, err := buildTimeline(t.Context(), ix, "S")
	if err != nil {
		t.Fatal(err)
	}
	if tl.Events != 12 {
		t.Errorf("timeline events = %d, want 12", tl.Events)
	}
	if len(tl.Processes) != 1 || tl.Processes[0].Pid != 10 || len(tl.Processes[0].Children) != 2 {
		t.Fatalf("process tree = %+v, want sh (10) with two children", tl.Processes)
	}
	sh := tl.Processes[0]
	if sh.ExitCode == nil || *sh.ExitCode != 7 || !sh.Exited {
		t.Errorf("sh exit = %v, want 7", sh.ExitCode)
	}
	if c := sh.Children[0]; c.Pid != 11 || !slices.Equal(c.Argv, []string{"/bin/echo", "a", "b c"}) || c.ExitCode == nil || *c.ExitCode != 0 {
		t.Errorf("first child = %+v, want echo (11), exit 0", c)
	}
	var kinds []string
	for _, s := range tl.Steps {
		kinds = append(kinds, s.Kind)
	}
	if want := []string{"session.create", "limit.hit", "session.terminate"}; !slices.Equal(kinds, want) {
		t.Errorf("steps = %q, want %q", kinds, want)
	}
	var b strings.Builder
	tl.writeText(&b)
	out := b.String()
	for _, want := range []string{"  10 sh -c x  cwd=/w  uid=1000  exit 7", "    11 /bin/echo a 'b c'  cwd=/w  uid=1000  exit 0",
		"pids: measured 64 count, configured 64 count, throttle", "reason=normal exit_status=7"} {
		if !strings.Contains(out, want) {
			t.Errorf("timeline text lacks %q:\n%s", want, out)
		}
	}
}

// TestControlProtocol exercises the control socket's framing, descriptor
// passing and errors against a server with no sessions.
func TestControlProtocol(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the control socket serves only uid 0")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "control.sock")
	ln, err := listenControl(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("control socket mode = %v, %v, want 0600", fi.Mode().Perm(), err)
	}
	if _, err := listenControl(path); err == nil {
		t.Error("listenControl() on a served socket = nil, want an error")
	}
	ctx, cancel := t.Context(), func() {}
	c := &controlServer{log: hclog.NewNullLogger(), path: path, ln: ln, ctx: ctx, cancel: cancel, sessions: map[string]*ctlSession{}}
	c.wg.Add(1)
	go c.serve()
	defer func() {
		ln.Close()
		c.wg.Wait()
	}()

	resp, err := controlCall(path, &controlRequest{Op: "list"})
	if err != nil || !resp.OK || len(resp.Sessions) != 0 {
		t.Errorf("list = %+v, %v, want ok and no sessions", resp, err)
	}
	tests := []struct {
		name  string
		req   controlRequest
		files int
		want  string
	}{
		{name: "unknown session", req: controlRequest{Op: "pause", Session: "nope"}, want: `no session "nope"`},
		{name: "run without descriptors", req: controlRequest{Op: "run"}, want: "want stdin, stdout and stderr descriptors, got 0"},
		{name: "run without spec", req: controlRequest{Op: "run"}, files: 3, want: "run: no spec"},
		{name: "create without spec", req: controlRequest{Op: "create"}, want: "create: no spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := controlDial(path)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var files []*os.File
			for range tt.files {
				files = append(files, os.Stderr)
			}
			if err := controlSend(conn, &tt.req, files); err != nil {
				t.Fatal(err)
			}
			var r controlResponse
			if err := jsonDecode(conn, &r); err != nil {
				t.Fatal(err)
			}
			if r.OK || !strings.Contains(r.Error, tt.want) {
				t.Errorf("%s = %+v, want an error containing %q", tt.req.Op, r, tt.want)
			}
		})
	}
	// Garbage is refused with an error, not a crash.
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("{nonsense\n"))
	var r controlResponse
	if err := jsonDecode(conn, &r); err != nil || r.OK || !strings.Contains(r.Error, "decoding request") {
		t.Errorf("garbage request = %+v, %v, want a decoding error", r, err)
	}
	conn.Close()

	if _, err := controlCall(filepath.Join(dir, "absent.sock"), &controlRequest{Op: "list"}); err != errNoDaemon {
		t.Errorf("controlCall(absent socket) = %v, want errNoDaemon", err)
	}
}

// TestRunNoAgentUser: without sandtrail-agent and without --user, run
// fails before doing anything, and says what to do.
func TestRunNoAgentUser(t *testing.T) {
	if _, err := lookupAccount(""); err == nil {
		t.Skip("sandtrail-agent exists on this machine")
	}
	_, err := lookupAccount("")
	if err != errNoAgentUser || !strings.Contains(err.Error(), "install.sh") || !strings.Contains(err.Error(), "--user") {
		t.Errorf("lookupAccount(\"\") = %v, want errNoAgentUser naming install.sh and --user", err)
	}
}

func jsonDecode(conn net.Conn, v any) error {
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	return json.NewDecoder(conn).Decode(v)
}
