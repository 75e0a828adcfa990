package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/test/netns"
	"github.com/sandtrail/sandtrail/test/shimtest"
)

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

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

// buildShims builds sandtrail-shim into dir (or copies SANDTRAIL_E2E_SHIM)
// and links it in shims as every manager it stands in for, as install.sh
// does in /usr/local/lib/sandtrail/shims.
func buildShims(dir, shims string) error {
	shim := filepath.Join(dir, "sandtrail-shim")
	if prebuilt := os.Getenv("SANDTRAIL_E2E_SHIM"); prebuilt != "" {
		if err := copyFile(prebuilt, shim, 0o755); err != nil {
			return err
		}
	} else if err := shimtest.Build(shim); err != nil {
		return err
	}
	return shimtest.Link(shim, shims)
}

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
func (e *env) tryRun(args ...string) (result, error) { return e.tryRunStdin(nil, args...) }

// runStdin is run with stdin as the session command's standard input.
func (e *env) runStdin(stdin io.Reader, args ...string) result {
	e.t.Helper()
	r, err := e.tryRunStdin(stdin, args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) tryRunStdin(stdin io.Reader, args ...string) (result, error) {
	c := e.cmd(append([]string{"run", "--format", "json"}, args...)...)
	c.Stdin = stdin
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

// writePolicy writes a policy file of body into the test's temporary
// directory and returns its path.
func writePolicy(t *testing.T, body string) string {
	t.Helper()
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return pol
}

// writerFunc adapts a function to io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// startMirror starts `sandtrail mirror` on a free loopback address, outside
// every session, with args added, and returns its npm registry URL and a
// function that stops it (the test's cleanup stops it too).
func (e *env) startMirror(t *testing.T, args ...string) (npmRegistry string, stop func()) {
	t.Helper()
	addr := freeAddr(t)
	m := e.cmd(append([]string{"mirror", "--listen", addr}, args...)...)
	var mlog strings.Builder
	m.Stderr = &mlog
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			m.Process.Signal(syscall.SIGTERM)
			m.Wait()
		}
	}
	t.Cleanup(stop)
	waitFor(t, "the mirror", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "http://" + addr + "/npm/", stop
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
