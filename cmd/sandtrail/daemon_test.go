package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
)

// daemonTestBinary builds the sandtrail binary into dir.
func daemonTestBinary(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go toolchain to build the sandtrail binary")
	}
	bin := filepath.Join(dir, "sandtrail")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("building sandtrail: %v\n%s", err, out)
	}
	return bin
}

// daemonTestRun runs the binary to completion.
func daemonTestRun(t *testing.T, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), o.String(), e.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, o.String(), e.String()
}

// TestDaemonAndEmit runs the real `sandtrail daemon` and `sandtrail emit`
// binaries: events are journaled with the server's attribution and redacted
// summaries, emit spools while the daemon is down, and SIGTERM closes the
// journal cleanly.
func TestDaemonAndEmit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root outside every session may emit for a session")
	}
	dir := t.TempDir()
	bin := daemonTestBinary(t, dir)
	data := filepath.Join(dir, "data")
	sock := filepath.Join(dir, "run", "ingest.sock")

	t.Run("missing key", func(t *testing.T) {
		code, _, stderr := daemonTestRun(t, bin, "daemon", "--data", data, "--socket", sock)
		if code == 0 || !strings.Contains(stderr, "sandtrail keys generate") {
			t.Fatalf("daemon without a key = %d, %q, want an error naming `sandtrail keys generate`", code, stderr)
		}
	})

	skey, vkey, err := journal.GenerateKey("sandtrail/daemon-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(data, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "keys", "checkpoint.key"), []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	type daemon struct {
		cmd    *exec.Cmd
		exited chan *os.ProcessState
	}
	start := func() *daemon {
		t.Helper()
		os.Remove(sock)
		d := &daemon{cmd: exec.Command(bin, "daemon", "--data", data, "--socket", sock, "--log-level", "warn"),
			exited: make(chan *os.ProcessState, 1)}
		d.cmd.Stderr = os.Stderr
		if err := d.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { st, _ := d.cmd.Process.Wait(); d.exited <- st }()
		// Wait for the socket to be served (or the daemon to die): it
		// appears at bind with the umask's mode, and gets its own mode
		// (0666) a moment later, when the listener is set up; the test
		// fails if that does not happen within 30 s (the daemon loads its
		// eBPF programs first, which takes seconds on a loaded machine).
		deadline := time.After(30 * time.Second)
		for {
			if fi, err := os.Stat(sock); err == nil && fi.Mode().Type() == os.ModeSocket && fi.Mode().Perm() == 0o666 {
				return d
			}
			select {
			case st := <-d.exited:
				t.Fatalf("daemon exited before serving: %v", st)
			case <-deadline:
				fi, err := os.Stat(sock)
				t.Fatalf("the daemon's socket is not served with mode 0666 after 30 s: %v, %v", fi, err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	stop := func(d *daemon) {
		t.Helper()
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if st := <-d.exited; st == nil || !st.Success() {
			t.Fatalf("daemon after SIGTERM: %v, want a clean exit", st)
		}
		if _, err := os.Stat(sock); !os.IsNotExist(err) {
			t.Errorf("socket still there after a clean stop: %v", err)
		}
	}
	emit := func(args ...string) (int, string, string) {
		return daemonTestRun(t, bin, append([]string{"emit", args[0], "--data", data, "--socket", sock}, args[1:]...)...)
	}

	d := start()
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("socket mode = %v, %v, want 0666", fi.Mode().Perm(), err)
	}
	code, out, stderr := emit("tool", "--session", "s1", "--name", "bash", "--status", "ok", "--duration-ms", "7",
		"--input-summary", "curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwx' https://example.com")
	if code != 0 || len(strings.TrimSpace(out)) != 32 {
		t.Fatalf("emit tool = %d, %q, %q, want 0 and an event id", code, out, stderr)
	}
	toolID := strings.TrimSpace(out)
	if code, out, stderr := emit("model", "--session", "s1", "--tokens", "42"); code != 0 {
		t.Fatalf("emit model = %d, %q, %q", code, out, stderr)
	}
	if code, _, _ := emit("tool", "--session", "s1", "--name", "x", "--status", "maybe"); code == 0 {
		t.Errorf("emit tool --status maybe = 0, want an error")
	}
	stop(d)

	// With the daemon down, emit spools; the next emit delivers both.
	code, _, stderr = emit("tool", "--session", "s2", "--name", "late", "--status", "timeout")
	if code != 0 || !strings.Contains(stderr, "spooled") {
		t.Fatalf("emit with the daemon down = %d, %q, want 0 and a note that it spooled", code, stderr)
	}
	d = start()
	if code, out, stderr := emit("tool", "--session", "s2", "--name", "after", "--status", "ok"); code != 0 {
		t.Fatalf("emit after restart = %d, %q, %q", code, out, stderr)
	}
	stop(d)

	jdir := filepath.Join(data, "journal")
	var evs []*event.Event
	err = journal.Scan(jdir, 0, func(_ uint64, raw []byte) error {
		var e event.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			return err
		}
		evs = append(evs, &e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	caps := 0
	for _, e := range evs {
		if e.Kind == event.KindCapabilities {
			caps++ // the collector's first event, once per daemon start
			continue
		}
		if e.Source != event.SourceAPI || e.Proc == nil || e.Proc.UID == nil || *e.Proc.UID != 0 {
			t.Errorf("event %+v: want source api and uid 0 from the server", e)
		}
		if e.Tool != nil {
			names = append(names, e.Tool.Name)
		}
		if e.EventID == toolID {
			if e.SessionID != "s1" || e.Tool.DurationMS != 7 || strings.Contains(e.Tool.InputSummary, "abcdefghij") {
				t.Errorf("emitted tool event = %+v %+v, want session s1, 7 ms, the bearer token redacted", e, e.Tool)
			}
		}
	}
	if got := strings.Join(names, ","); len(evs)-caps != 4 || got != "bash,late,after" {
		t.Errorf("journal = %d events besides collector.capabilities, tools %s, want 4 events, tools bash,late,after", len(evs)-caps, got)
	}
	if caps != 2 {
		t.Errorf("journal has %d collector.capabilities events, want 2, one per daemon start", caps)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := journal.Verify(jdir, note.VerifierList(v), nil)
	if err != nil || rep.Status != journal.StatusIntact {
		t.Fatalf("journal.Verify = %+v, %v, want intact (the daemon checkpoints on close)", rep, err)
	}
}
