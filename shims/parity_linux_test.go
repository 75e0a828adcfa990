package shims_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest"
	"github.com/sandtrail/sandtrail/record/ingest/server"
	"github.com/sandtrail/sandtrail/registry-mirror/pypi/pypitest"
	"github.com/sandtrail/sandtrail/test/shimtest"
)

// allow answers every check allow.
type allow struct{}

func (allow) Check(_ context.Context, _ string, cs []ingest.Check) []ingest.Verdict {
	out := make([]ingest.Verdict, len(cs))
	for i := range out {
		out[i] = ingest.Verdict{Verdict: "allow"}
	}
	return out
}

// discard is a journal that keeps nothing.
type discard struct{}

func (discard) Append(context.Context, ...*event.Event) error { return nil }

// shimEnv builds sandtrail-shim, links it as every manager in a shim
// directory, and serves an ingest socket whose policy allows everything.
// It returns the shim directory and the environment to run with (the shim
// directory first on PATH).
func shimEnv(t *testing.T) (string, []string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the ingest server attributes peers by their cgroup: run as root")
	}
	dir := t.TempDir()
	shim := filepath.Join(dir, "sandtrail-shim")
	if err := shimtest.Build(shim); err != nil {
		t.Fatal(err)
	}
	shims := filepath.Join(dir, "shims")
	if err := shimtest.Link(shim, shims, "npm", "pip", "cargo", "apt-get"); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "ingest.sock")
	ln, err := server.Listen(sock, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(discard{}, server.NewTable(), server.WithChecker(allow{}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	path := shims + ":" + filepath.Join(dir, "real") + ":/usr/local/bin:/usr/bin:/bin"
	if p, err := exec.LookPath("cargo"); err == nil {
		path += ":" + filepath.Dir(p)
	}
	env := []string{"PATH=" + path, "HOME=" + t.TempDir(), "LANG=C.UTF-8", "SANDTRAIL_SOCKET=" + sock}
	// rustup's cargo finds its toolchains through RUSTUP_HOME, which is
	// under the caller's own HOME.
	rustup := os.Getenv("RUSTUP_HOME")
	if home, err := os.UserHomeDir(); rustup == "" && err == nil {
		rustup = filepath.Join(home, ".rustup")
	}
	if fi, err := os.Stat(rustup); err == nil && fi.IsDir() {
		env = append(env, "RUSTUP_HOME="+rustup)
	}
	return shims, env
}

// outcome is what a run printed and how it ended.
type outcome struct {
	stdout, stderr string
	code           int
	signal         syscall.Signal
}

func runIn(t *testing.T, dir string, env []string, stdin string, argv ...string) outcome {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, env, strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running %q: %v", argv, err)
	}
	o := outcome{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		o.signal = ws.Signal()
	}
	return o
}

// took is npm's "added 1 package in 339ms" and cargo's "target(s) in 0.35s".
var took = regexp.MustCompile(`in [0-9.]+m?s\b`)

// TestOutputParity: through the shim, stdout, stderr and the exit code of
// each manager equal a direct run's, byte for byte, for calls without
// install intent (exec'd), and for installs that succeed and fail (run as
// the shim's child, checked, read back).
func TestOutputParity(t *testing.T) {
	shims, env := shimEnv(t)
	tests := []struct {
		name string
		argv []string
		need string
	}{
		{"npm version", []string{"npm", "--version"}, "/usr/bin/npm"},
		{"npm install fails", []string{"npm", "install", "./missing", "--no-audit", "--no-fund", "--no-update-notifier", "--logs-max=0"}, "/usr/bin/npm"},
		{"npm install succeeds", []string{"npm", "install", "./local", "--no-audit", "--no-fund", "--no-update-notifier", "--logs-max=0"}, "/usr/bin/npm"},
		{"pip version", []string{"pip", "--version"}, "/usr/bin/pip"},
		{"pip install succeeds", []string{"pip", "install", "--no-index", "--disable-pip-version-check", "--target", "t", "./" + pypitest.WheelName("local-pkg", "1.0")}, "/usr/bin/pip"},
		{"pip install fails", []string{"pip", "install", "--no-index", "--disable-pip-version-check", "nonexistent-xyz"}, "/usr/bin/pip"},
		{"pip install refused by the system", []string{"pip", "install", "--no-index", "--disable-pip-version-check", "--target", "t", "nonexistent-xyz"}, "/usr/bin/pip"},
		{"cargo version", []string{"cargo", "--version"}, "cargo"},
		{"cargo build fails", []string{"cargo", "build", "--manifest-path", "missing/Cargo.toml"}, "cargo"},
		{"cargo build succeeds", []string{"cargo", "build", "--offline", "--manifest-path", "crate/Cargo.toml"}, "cargo"},
		{"apt-get simulate", []string{"apt-get", "install", "-s", "-qq", "dpkg"}, "/usr/bin/apt-get"},
		{"apt-get fails", []string{"apt-get", "install", "-s", "nonexistent-pkg-xyz"}, "/usr/bin/apt-get"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			real := tt.need
			if !filepath.IsAbs(real) {
				p, err := exec.LookPath(real)
				if err != nil {
					t.Skipf("%s is not installed", real)
				}
				real = p
			}
			if _, err := os.Stat(real); err != nil {
				t.Skipf("%s is not installed", real)
			}
			direct, viaShim := t.TempDir(), t.TempDir()
			for _, d := range []string{direct, viaShim} {
				// The same relative layout in both: a local package for npm.
				os.MkdirAll(filepath.Join(d, "local"), 0o755)
				os.WriteFile(filepath.Join(d, "local", "package.json"), []byte(`{"name":"local","version":"1.0.0"}`), 0o644)
				os.WriteFile(filepath.Join(d, "package.json"), []byte(`{"name":"p","version":"1.0.0"}`), 0o644)
				// A wheel for pip, a crate without dependencies for cargo.
				os.WriteFile(filepath.Join(d, pypitest.WheelName("local-pkg", "1.0")), pypitest.Wheel("local-pkg", pypitest.Version{Version: "1.0"}), 0o644)
				os.MkdirAll(filepath.Join(d, "crate", "src"), 0o755)
				os.WriteFile(filepath.Join(d, "crate", "Cargo.toml"), []byte("[package]\nname = \"local\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"), 0o644)
				os.WriteFile(filepath.Join(d, "crate", "src", "lib.rs"), []byte("pub fn f() {}\n"), 0o644)
			}
			want := runIn(t, direct, env, "", append([]string{real}, tt.argv[1:]...)...)
			got := runIn(t, viaShim, env, "", append([]string{filepath.Join(shims, tt.argv[0])}, tt.argv[1:]...)...)
			// Only the run's own directory and npm's timing may differ.
			norm := func(s, dir string) string { return took.ReplaceAllString(strings.ReplaceAll(s, dir, "DIR"), "in TIME") }
			if strings.HasSuffix(tt.name, "succeeds") && want.code != 0 {
				t.Fatalf("%q directly: exit %d, want a success to compare\n%s", tt.argv, want.code, want.stderr)
			}
			if norm(got.stdout, viaShim) != norm(want.stdout, direct) || norm(got.stderr, viaShim) != norm(want.stderr, direct) || got.code != want.code {
				t.Errorf("%q through the shim: exit %d\nstdout %q\nstderr %q\nwant exit %d\nstdout %q\nstderr %q",
					tt.argv, got.code, got.stdout, got.stderr, want.code, want.stdout, want.stderr)
			}
		})
	}
}

// TestTransparent: a manager's stdin, stdout, stderr, exit code and the
// signal that ended it all pass through the shim for an install; the shim
// writes nothing to stdout.
func TestTransparent(t *testing.T) {
	shims, env := shimEnv(t)
	realDir := filepath.Join(strings.Split(strings.TrimPrefix(env[0], "PATH="), ":")[1])
	if err := os.MkdirAll(realDir, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := "#!/bin/sh\n" +
		"read line; echo \"out:$line:$*\"; echo err >&2\n" +
		"case \"$2\" in sigign) grep SigIgn /proc/self/status; exit 0 ;; esac\n" +
		"case \"$2\" in die) kill -\"$3\" $$ ;; esac\n" +
		"exit 42\n"
	if err := os.WriteFile(filepath.Join(realDir, "npm"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	got := runIn(t, dir, env, "hello\n", filepath.Join(shims, "npm"), "install", "left-pad")
	if got.stdout != "out:hello:install left-pad\n" || got.stderr != "err\n" || got.code != 42 {
		t.Errorf("through the shim: %+v, want stdin echoed, stderr passed, exit 42", got)
	}
	// Ctrl-C must still reach the manager: the shim catches SIGINT and
	// SIGQUIT, never ignores them (an ignored signal stays ignored across
	// exec). The manager's ignored set is the caller's.
	direct := runIn(t, dir, env, "x\n", filepath.Join(realDir, "npm"), "install", "sigign")
	got = runIn(t, dir, env, "x\n", filepath.Join(shims, "npm"), "install", "sigign")
	if !strings.Contains(got.stdout, "SigIgn:") || got.stdout != direct.stdout {
		t.Errorf("the manager's ignored signals through the shim: %q, directly %q", got.stdout, direct.stdout)
	}
	// The shim ends by the manager's signal with its default action: never
	// with the Go runtime's goroutine dump (SIGQUIT, SIGABRT) or an exit
	// code for a signal the runtime would swallow (SIGUSR1).
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGABRT, syscall.SIGUSR1} {
		got = runIn(t, dir, env, "x\n", filepath.Join(shims, "npm"), "install", "die", strconv.Itoa(int(sig)))
		if got.signal != sig || got.stderr != "err\n" {
			t.Errorf("a manager killed by %v: the shim ended with %+v, want the same signal and only the manager's stderr", sig, got)
		}
	}
}
