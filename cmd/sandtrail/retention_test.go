package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/journal"
)

// retentionFixture makes a data dir with keys and a closed journal holding
// sessions old-a and old-b, which ended 200 days ago, and new, which ended
// an hour ago; and points the commands at it with no daemon (a control
// socket path where none listens).
func retentionFixture(t *testing.T) string {
	t.Helper()
	t.Setenv("SANDTRAIL_SOCKET", filepath.Join(t.TempDir(), "ingest.sock"))
	t.Setenv("SANDTRAIL_ORIGIN", "sandtrail/test")
	t.Setenv("SANDTRAIL_CONFIG", filepath.Join(t.TempDir(), "none.yaml"))
	if err := os.WriteFile(os.Getenv("SANDTRAIL_CONFIG"), []byte("log_level: error\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dataWithJournal(t, oldSessions()...)
}

// oldSessions are the events of old-a and old-b, which ended 200 days ago,
// and new, which ended an hour ago: an exec and a terminate each.
func oldSessions() []*event.Event {
	old, recent := time.Now().Add(-200*24*time.Hour), time.Now().Add(-time.Hour)
	var evs []*event.Event
	for _, sess := range []struct {
		id string
		at time.Time
	}{{"old-a", old}, {"old-b", old.Add(time.Minute)}, {"new", recent}} {
		evs = append(evs, &event.Event{TS: sess.at, SessionID: sess.id, Kind: event.KindExec, Source: event.SourceKernel,
			Proc: &event.Proc{Pid: 7, Comm: "sh", Exe: "/bin/sh"}},
			&event.Event{TS: sess.at.Add(time.Second), SessionID: sess.id, Kind: event.KindSessionTerminate, Source: event.SourceSession,
				Session: &event.Session{Op: "terminate", Reason: "normal"}})
	}
	return evs
}

// TestRetentionCLI runs retention apply and hold on a journal with old
// sessions and no daemon: the dry run changes nothing, a held session is
// kept, apply prunes the rest from the index and the journal, verify and
// prove still pass, and after hold remove the held session goes too.
func TestRetentionCLI(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: with no daemon, retention opens the journal as its writer")
	}
	data := retentionFixture(t)
	seg := filepath.Join(data, "journal", "seg-000000000000.log")
	before, _ := os.ReadFile(seg)
	rep := retentionApply(t, data, "--dry-run")
	if !rep.DryRun || !slices.Equal(retentionIDs(rep.Sessions), []string{"old-a", "old-b"}) || rep.Entries != 4 {
		t.Fatalf("retention apply --dry-run = %+v, want old-a and old-b, 4 entries", rep)
	}
	if after, _ := os.ReadFile(seg); string(after) != string(before) {
		t.Fatal("retention apply --dry-run changed the journal")
	}
	if code, out := runCLI(t, "--data", data, "hold", "add", "old-b"); code != exitFailed {
		t.Errorf("hold add without --reason = %d, %s, want a usage error", code, out)
	}
	if code, out := runCLI(t, "--data", data, "hold", "add", "old-b", "--reason", "case 12"); code != 0 || !strings.Contains(out, "held old-b") {
		t.Fatalf("hold add = %d, %q", code, out)
	}
	code, out := runCLI(t, "--data", data, "hold", "list", "--format", "json")
	var holds []index.Hold
	if err := json.Unmarshal([]byte(out), &holds); code != 0 || err != nil || len(holds) != 1 || holds[0].Session != "old-b" ||
		holds[0].UID == nil || *holds[0].UID != uint32(os.Getuid()) {
		t.Fatalf("hold list --format json = %d, %q", code, out)
	}
	// Listing needs no journal writer: it works while another process
	// (a daemon-less sandtrail run) holds the journal.
	signer, err := journal.LoadSigner(filepath.Join(data, "keys", "checkpoint.key"))
	if err != nil {
		t.Fatal(err)
	}
	writer, err := journal.Open(filepath.Join(data, "journal"), signer)
	if err != nil {
		t.Fatal(err)
	}
	if code, out := runCLI(t, "--data", data, "hold", "list"); code != 0 || !strings.Contains(out, "old-b") {
		t.Errorf("hold list while the journal is open elsewhere = %d, %q", code, out)
	}
	if err := writer.Close(); err != nil {
		t.Fatal(err)
	}
	rep = retentionApply(t, data)
	if !slices.Equal(retentionIDs(rep.Sessions), []string{"old-a"}) || !slices.Equal(retentionIDs(rep.Held), []string{"old-b"}) ||
		rep.Journal == nil || rep.Journal.Pruned != 2 {
		t.Fatalf("retention apply = %+v, want old-a pruned, old-b held", rep)
	}
	if code, out := runCLI(t, "--data", data, "verify"); code != exitOK || !strings.Contains(out, "pruned      2 entries") {
		t.Fatalf("verify after the prune = %d, %s", code, out)
	}
	pruned := rep.Sessions[0].Ranges[0].First
	if code, out := runCLI(t, "--data", data, "prove", strconv.FormatUint(pruned, 10)); code != exitOK || !strings.Contains(out, "pruned by the retention policy") {
		t.Errorf("prove of pruned seq %d = %d, %s", pruned, code, out)
	}
	code, out = runCLI(t, "--data", data, "sessions", "--format", "json")
	if code != 0 || strings.Contains(out, `"old-a"`) || !strings.Contains(out, `"old-b"`) || !strings.Contains(out, `"new"`) {
		t.Errorf("sessions after the prune = %d, %s, want old-b and new, not old-a", code, out)
	}
	if code, out := runCLI(t, "--data", data, "hold", "remove", "old-b", "--reason", "closed"); code != 0 {
		t.Fatalf("hold remove = %d, %s", code, out)
	}
	rep = retentionApply(t, data)
	if !slices.Equal(retentionIDs(rep.Sessions), []string{"old-b"}) || len(rep.Held) != 0 {
		t.Fatalf("retention apply after hold remove = %+v, want old-b pruned", rep)
	}
	if code, out := runCLI(t, "--data", data, "verify", "--format", "json"); code != exitOK || !strings.Contains(out, `"pruned": 4`) {
		t.Errorf("verify = %d, %s, want intact with 4 pruned", code, out)
	}
	code, out = runCLI(t, "--data", data, "retention", "apply")
	if code != 0 || !strings.Contains(out, "pruned 0 entries") {
		t.Errorf("retention apply (table) with nothing to prune = %d, %q", code, out)
	}
}

// retentionApply runs retention apply --format json with args.
func retentionApply(t *testing.T, data string, args ...string) *control.RetentionReport {
	t.Helper()
	code, out := runCLI(t, append([]string{"--data", data, "retention", "apply", "--format", "json"}, args...)...)
	var rep control.RetentionReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("retention apply %v = %d, %q, %v", args, code, out, err)
	}
	return &rep
}

func retentionIDs(ss []control.RetentionSession) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

// TestRetentionThroughDaemon runs the real `sandtrail daemon` on a journal
// with old sessions and drives retention through its control socket with
// the real binary: the hold is journaled with the peer's uid, apply
// prunes through the daemon (the journal's one writer), and the journal
// verifies after the daemon stops.
func TestRetentionThroughDaemon(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon loads BPF programs and the control socket serves only uid 0")
	}
	dir := t.TempDir()
	bin := daemonTestBinary(t, dir)
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "run", "ingest.sock")
	host, _ := os.Hostname()
	v := oldSessionsJournal(t, data, "sandtrail/"+host)
	t.Setenv("SANDTRAIL_SOCKET", sock)
	t.Setenv("SANDTRAIL_RETENTION_INTERVAL", "1h") // the daemon's own first run is a minute away
	d := exec.Command(bin, "daemon", "--data", data, "--socket", sock, "--log-level", "warn")
	d.Stderr = os.Stderr
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan *os.ProcessState, 1)
	go func() { st, _ := d.Process.Wait(); exited <- st }()
	t.Cleanup(func() { _ = d.Process.Kill() })
	waitForSocket(t, filepath.Join(dir, "run", "control.sock"), exited)
	cli := func(args ...string) (int, string) {
		code, out, stderr := daemonTestRun(t, bin, append([]string{"--data", data}, args...)...)
		if code != 0 {
			t.Logf("sandtrail %v: %s", args, stderr)
		}
		return code, out
	}
	if code, out := cli("hold", "add", "old-b", "--reason", "case 12"); code != 0 {
		t.Fatalf("hold add through the daemon = %d, %s", code, out)
	}
	code, out := cli("retention", "apply", "--dry-run", "--format", "json")
	var rep control.RetentionReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || !rep.DryRun ||
		!slices.Equal(retentionIDs(rep.Sessions), []string{"old-a"}) || !slices.Equal(retentionIDs(rep.Held), []string{"old-b"}) {
		t.Fatalf("retention apply --dry-run through the daemon = %d, %s", code, out)
	}
	code, out = cli("retention", "apply", "--format", "json")
	rep = control.RetentionReport{}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Journal == nil || rep.Journal.Pruned != 2 || len(rep.Events) != 1 {
		t.Fatalf("retention apply through the daemon = %d, %s", code, out)
	}
	code, out = cli("hold", "list", "--format", "json")
	var holds []index.Hold
	if err := json.Unmarshal([]byte(out), &holds); code != 0 || err != nil || len(holds) != 1 || holds[0].UID == nil || *holds[0].UID != 0 {
		t.Fatalf("hold list through the daemon = %d, %s", code, out)
	}
	if err := d.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if st := <-exited; st == nil || !st.Success() {
		t.Fatalf("daemon after SIGTERM: %v", st)
	}
	jdir := filepath.Join(data, "journal")
	vr, err := journal.Verify(jdir, v, nil)
	if err != nil || vr.Status != journal.StatusIntact || vr.Pruned != 2 {
		t.Fatalf("Verify() after the daemon pruned = %+v, %v", vr, err)
	}
	if _, err := journal.Entry(jdir, rep.Sessions[0].Ranges[0].First); !errors.Is(err, journal.ErrPruned) {
		t.Errorf("old-a's first entry = %v, want pruned", err)
	}
}

// oldSessionsJournal writes a signing key into data and a closed journal
// of origin holding old-a and old-b, which ended 200 days ago, and new,
// which ended an hour ago. It returns the journal's verifiers.
func oldSessionsJournal(t *testing.T, data, origin string) note.Verifiers {
	t.Helper()
	skey, vkey, err := journal.GenerateKey("sandtrail/retention-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(data, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "keys", "checkpoint.key"), []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(filepath.Join(data, "journal"), s, journal.WithOrigin(origin))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(context.Background(), oldSessions()...); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	vr, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return note.VerifierList(vr)
}

// waitForSocket waits up to 10 s for a unix socket at path, failing when
// the process that should serve it exits first.
func waitForSocket(t *testing.T, path string, exited <-chan *os.ProcessState) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if fi, err := os.Stat(path); err == nil && fi.Mode().Type() == os.ModeSocket && fi.Mode().Perm() == 0o600 {
			return
		}
		select {
		case st := <-exited:
			t.Fatalf("daemon exited before serving %s: %v", path, st)
		case <-deadline:
			t.Fatalf("%s is not served after 10 s", path)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestRetentionColdTier: with retention.archive set, apply seals each
// session into the store before it prunes it (a directory, and a real
// registry on loopback), and each bundle verifies against the pruned
// journal (archive verify --live); a store that cannot take a bundle
// keeps its session unpruned.
func TestRetentionColdTier(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: with no daemon, retention opens the journal as its writer")
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	dead := httptest.NewServer(nil)
	dead.Close()
	useStore := func(t *testing.T, store string) {
		t.Helper()
		conf := "log_level: error\nretention:\n  archive: " + store + "\n"
		if err := os.WriteFile(os.Getenv("SANDTRAIL_CONFIG"), []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stores := map[string]string{
		"dir": filepath.Join(t.TempDir(), "cold"),
		"oci": "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/sandtrail/cold",
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			data := retentionFixture(t)
			useStore(t, store)
			rep := retentionApply(t, data)
			if !slices.Equal(retentionIDs(rep.Sessions), []string{"old-a", "old-b"}) || len(rep.Failed) != 0 {
				t.Fatalf("retention apply = %+v, want old-a and old-b archived and pruned", rep)
			}
			code, out := runCLI(t, "--data", data, "archive", "list", "--from", store, "--format", "json")
			if code != exitOK || !strings.Contains(out, `"old-a"`) || !strings.Contains(out, `"old-b"`) || strings.Contains(out, `"new"`) {
				t.Fatalf("archive list = %d, %s, want old-a and old-b", code, out)
			}
			for _, id := range []string{"old-a", "old-b"} {
				if code, out := runCLI(t, "--data", data, "archive", "verify", id, "--from", store, "--live"); code != exitOK {
					t.Errorf("archive verify %s --live after the prune = %d, %s", id, code, out)
				}
			}
			if code, out := runCLI(t, "--data", data, "verify"); code != exitOK {
				t.Errorf("verify after the prune = %d, %s", code, out)
			}
		})
	}
	t.Run("a store that fails keeps the sessions", func(t *testing.T) {
		data := retentionFixture(t)
		useStore(t, "oci://"+strings.TrimPrefix(dead.URL, "http://")+"/sandtrail/cold")
		rep := retentionApply(t, data)
		if len(rep.Sessions) != 0 || !slices.Equal(retentionIDs(rep.Failed), []string{"old-a", "old-b"}) ||
			rep.Journal != nil && rep.Journal.Pruned != 0 {
			t.Fatalf("retention apply into a store that is down = %+v, want both failed, nothing pruned", rep)
		}
	})
}
