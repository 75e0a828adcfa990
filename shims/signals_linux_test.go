package shims_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// launchIgnoring names the environment variable that turns the test binary
// into a launcher: it ignores the signals the variable lists (numbers,
// comma-separated), puts SIGHUP and SIGINT back to their default otherwise,
// and execs its arguments. Only SIGHUP and SIGINT can arrive ignored in a Go
// program (the runtime resets every other inherited SIG_IGN), so the
// command starts with exactly the listed signals ignored, however the test
// itself was started (under nohup, as a background job).
const launchIgnoring = "SANDTRAIL_TEST_LAUNCH_IGNORING"

// TestMain runs the launcher when launchIgnoring is set, else the tests.
func TestMain(m *testing.M) {
	if v, ok := os.LookupEnv(launchIgnoring); ok {
		os.Exit(launch(v, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// launch execs argv with the signals that ignore lists ignored; it returns
// only on failure.
func launch(ignore string, argv []string) int {
	ignored := map[syscall.Signal]bool{}
	for _, f := range strings.FieldsFunc(ignore, func(r rune) bool { return r == ',' }) {
		n, err := strconv.Atoi(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "launcher: %s=%s: %v\n", launchIgnoring, ignore, err)
			return 2
		}
		ignored[syscall.Signal(n)] = true
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT} {
		if !ignored[sig] {
			// A caught signal is reset to the default across exec.
			signal.Notify(make(chan os.Signal, 1), sig)
		}
	}
	for sig := range ignored {
		signal.Ignore(sig)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, launchIgnoring+"=") {
			env = append(env, kv)
		}
	}
	err := syscall.Exec(argv[0], argv, env)
	fmt.Fprintf(os.Stderr, "launcher: exec %s: %v\n", argv[0], err)
	return 2
}

// launchCmd is a command that runs argv with exactly the signals ignored
// ignored.
func launchCmd(t *testing.T, ignored []syscall.Signal, env []string, argv ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var nums []string
	for _, sig := range ignored {
		nums = append(nums, strconv.Itoa(int(sig)))
	}
	cmd := exec.Command(self, argv...)
	cmd.Env = append(append([]string(nil), env...), launchIgnoring+"="+strings.Join(nums, ","))
	return cmd
}

// sigIgnMask is /proc/PID/status's SigIgn for the signals sigs.
func sigIgnMask(sigs []syscall.Signal) string {
	var mask uint64
	for _, sig := range sigs {
		mask |= 1 << (uint(sig) - 1)
	}
	return fmt.Sprintf("%016x", mask)
}

// standardSignals keeps, of a SigIgn mask, the standard signals (1 to 31):
// the launcher can set only those, and what the test's own environment
// ignores beyond them (a CI runner's real-time signal 32, which the Go
// runtime may not touch) passes through every process alike.
func standardSignals(t *testing.T, mask string) string {
	t.Helper()
	v, err := strconv.ParseUint(mask, 16, 64)
	if err != nil {
		t.Fatalf("SigIgn %q: %v", mask, err)
	}
	return fmt.Sprintf("%016x", v&(1<<31-1))
}

// writeReal writes the "real" manager name as script, in the directory
// after the shims on env's PATH, and returns its path.
func writeReal(t *testing.T, env []string, name, script string) string {
	t.Helper()
	realDir := strings.Split(strings.TrimPrefix(env[0], "PATH="), ":")[1]
	if err := os.MkdirAll(realDir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(realDir, name)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSignalDispositionsPassThrough: the real manager starts with the
// signals ignored that the shim was started with ignored, and no others,
// both when the shim runs it as its child (an install) and when it execs
// it (a call without install intent). SIGHUP is nohup's, SIGINT a
// background job's.
func TestSignalDispositionsPassThrough(t *testing.T) {
	shims, env := shimEnv(t)
	real := writeReal(t, env, "npm", "#!/bin/sh\ngrep SigIgn /proc/self/status\n")
	tests := []struct {
		name    string
		ignored []syscall.Signal
	}{
		{"nothing ignored", nil},
		{"SIGHUP ignored", []syscall.Signal{syscall.SIGHUP}},
		{"SIGINT ignored", []syscall.Signal{syscall.SIGINT}},
		{"SIGHUP and SIGINT ignored", []syscall.Signal{syscall.SIGHUP, syscall.SIGINT}},
	}
	for _, tt := range tests {
		for _, args := range [][]string{{"install", "left-pad"}, {"--version"}} {
			t.Run(tt.name+"/"+args[0], func(t *testing.T) {
				dir := t.TempDir()
				run := func(argv ...string) string {
					cmd := launchCmd(t, tt.ignored, env, argv...)
					cmd.Dir = dir
					out, err := cmd.Output()
					if err != nil {
						t.Fatalf("%q: %v", argv, err)
					}
					return standardSignals(t, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "SigIgn:")))
				}
				want := sigIgnMask(tt.ignored)
				if direct := run(append([]string{real}, args...)...); direct != want {
					t.Fatalf("the manager started directly ignores %s, want %s: the launcher did not set up", direct, want)
				}
				if got := run(append([]string{filepath.Join(shims, "npm")}, args...)...); got != want {
					t.Errorf("npm %s through the shim: the manager ignores %s, want %s, as the shim was started", args[0], got, want)
				}
			})
		}
	}
}

// TestHangupToProcessGroup: a SIGHUP to the shim's process group (the
// terminal hanging up) ends an install when SIGHUP was not ignored, and the
// shim ends by it too; under nohup both the manager and the shim survive it.
func TestHangupToProcessGroup(t *testing.T) {
	shims, env := shimEnv(t)
	writeReal(t, env, "npm", "#!/bin/sh\necho ready\nread line\necho survived\n")
	tests := []struct {
		name    string
		ignored []syscall.Signal
		survive bool
	}{
		{"SIGHUP ignored", []syscall.Signal{syscall.SIGHUP}, true},
		{"SIGHUP default", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := launchCmd(t, tt.ignored, env, filepath.Join(shims, "npm"), "install", "left-pad")
			cmd.Dir = t.TempDir()
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			out := bufio.NewReader(stdout)
			if line, err := out.ReadString('\n'); line != "ready\n" {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("the manager's first line: %q, %v, want ready\n%s", line, err, stderr.String())
			}
			// The launcher exec'd the shim: its pid is the group's.
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			_, _ = stdin.Write([]byte("go on\n")) // fails when the manager is gone
			_ = stdin.Close()
			b, _ := io.ReadAll(out)
			rest := string(b)
			_ = cmd.Wait()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if tt.survive {
				if rest != "survived\n" || !ws.Exited() || ws.ExitStatus() != 0 {
					t.Errorf("SIGHUP to the group under nohup: the manager wrote %q, the shim ended %v, want both to survive\n%s",
						rest, cmd.ProcessState, stderr.String())
				}
				return
			}
			if rest != "" || !ws.Signaled() || ws.Signal() != syscall.SIGHUP {
				t.Errorf("SIGHUP to the group: the manager wrote %q, the shim ended %v, want both ended by SIGHUP\n%s",
					rest, cmd.ProcessState, stderr.String())
			}
		})
	}
}
