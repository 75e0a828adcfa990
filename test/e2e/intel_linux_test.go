package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// fixtureDepRecord lists pipEnv's fixture-dep 0.1 as malicious.
const fixtureDepRecord = `{"id":"MAL-2026-900","modified":"2026-11-30T00:00:00Z","summary":"Malicious code in fixture-dep (PyPI)",
"affected":[{"package":{"ecosystem":"PyPI","name":"fixture_dep"},"ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"0.1"},{"fixed":"0.2"}]}]}]}`

// TestIntelRehunt: a past session installs fixture-pkg, and with it
// fixture-dep 0.1, through the shim and the mirror; an import of a record
// listing fixture-dep 0.1 re-hunts the record: hunt finds the session and
// a known_malicious alert is in its journal; a new session's install of
// the same version is refused by the mirror; an import that withdraws the
// record makes hunt find nothing, and the alert stays.
func TestIntelRehunt(t *testing.T) {
	t.Parallel()
	e, _, pol := pipEnv(t)
	intelRehunt(t, e, "journal", "--policy", pol)
	e.verify()
}

// TestIntelRehuntDaemon is TestIntelRehunt with a daemon running: the
// re-hunt's alert goes through its control socket, and its mirror reads
// the import.
func TestIntelRehuntDaemon(t *testing.T) {
	t.Parallel()
	e, ix, _ := pipEnv(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("mirror:\n  listen: "+freeAddr(t)+"\n  upstreams:\n    pypi: "+ix.SimpleURL()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "SANDTRAIL_CONFIG="+cfg)
	_, _, stop := startDNSDaemon(t, e, "sources:\n  registries:\n    pypi: ["+ix.SimpleURL()+", "+ix.Files.URL+"/packages/]\n")
	defer stop()
	intelRehunt(t, e, "daemon")
	stop()
	e.verify()
}

// intelRehunt runs TestIntelRehunt's steps in e, each session run with
// runArgs; via is where the alerts are to go.
func intelRehunt(t *testing.T, e *env, via string, runArgs ...string) {
	t.Helper()
	run := func(script string) result {
		return e.run(append(append([]string{"--user", "nobody"}, runArgs...), "--", "sh", "-c", script)...)
	}
	r := run(pipInstall(`fixture-pkg==1.5`))
	if r.code != 0 {
		t.Fatalf("pip install fixture-pkg: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	past := r.summary.SessionID
	src := filepath.Join(t.TempDir(), "osv")
	writeRecord(t, filepath.Join(src, "malicious", "pypi", "fixture-dep", "MAL-2026-900.json"))
	imp := intelImport(t, e, src)
	if imp.Counts.Kept != 1 || imp.Rehunt.Alerts != 1 || imp.Rehunt.Sessions != 1 || imp.Rehunt.Via != via {
		t.Fatalf("intel import = %+v, want 1 kept and 1 alert in 1 session, through the %s", imp, via)
	}
	fs, code := hunt(t, e)
	if code != 6 || len(fs) == 0 || fs[0].SessionID != past || fs[0].Advisory != "MAL-2026-900" || fs[0].Package != "pkg:pypi/fixture-dep@0.1" {
		t.Fatalf("hunt = exit %d, %+v; want session %s's fixture-dep 0.1 (exit 6)", code, fs, past)
	}
	var alert *event.Alert
	for _, ev := range kinds(e.events(past), event.KindAlert) {
		if ev.Alert.RuleID == "known_malicious" && ev.Source == event.SourceRules {
			alert = ev.Alert
		}
	}
	if alert == nil || alert.Advisory != "MAL-2026-900" || alert.Level != "critical" || alert.Package != "pkg:pypi/fixture-dep@0.1" || len(alert.Refs) == 0 {
		t.Fatalf("known_malicious alert in %s = %+v", past, alert)
	}
	// The mirror of a new session reads the store (a running one within a
	// second): the listed version is hidden, and the install that needs it
	// fails.
	time.Sleep(1100 * time.Millisecond)
	r = run(pipInstall(`fixture-dep==0.1`))
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "No matching distribution") {
		t.Errorf("pip install fixture-dep==0.1 after the import: exit %d, want no matching distribution\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	filtered := false
	for _, ev := range kinds(e.events(r.summary.SessionID), event.KindPkgFilter) {
		for _, rm := range ev.Pkg.Removed {
			filtered = filtered || (rm.Version == "0.1" && rm.Rule == "known_malicious" && strings.Contains(rm.Reason, "MAL-2026-900"))
		}
	}
	if !filtered {
		t.Errorf("no pkg.filter removed fixture-dep 0.1 by known_malicious:\n%s", e.pkgEvents(r.summary.SessionID))
	}
	// Withdrawn: hunt no longer reports it; the alert stays.
	writeRecord(t, filepath.Join(src, "withdrawn", "pypi", "fixture-dep", "MAL-2026-900.json"))
	os.Remove(filepath.Join(src, "malicious", "pypi", "fixture-dep", "MAL-2026-900.json"))
	if imp := intelImport(t, e, src); imp.Counts.Removed != 1 {
		t.Errorf("withdrawing import = %+v, want the record removed", imp.Counts)
	}
	if fs, code := hunt(t, e); code != 0 || len(fs) != 0 {
		t.Errorf("hunt after the withdrawal = exit %d, %+v; want nothing", code, fs)
	}
	if n := len(kinds(e.events(past), event.KindAlert)); n == 0 {
		t.Errorf("the alert left the journal after the withdrawal")
	}
}

func writeRecord(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(fixtureDepRecord), 0o644); err != nil {
		t.Fatal(err)
	}
}

// imported is the part of intel import's JSON the test reads.
type imported struct {
	Counts struct{ Kept, Withdrawn, Removed int }
	Rehunt struct {
		Findings, Sessions, Alerts int
		Via                        string
	}
}

func intelImport(t *testing.T, e *env, path string) imported {
	t.Helper()
	out, err := e.cmd("intel", "import", path, "--format", "json").Output()
	if err != nil {
		t.Fatalf("sandtrail intel import: %v\n%s", err, out)
	}
	var imp imported
	if err := json.Unmarshal(out, &imp); err != nil {
		t.Fatalf("intel import output: %v\n%s", err, out)
	}
	return imp
}

// huntFinding is the part of a hunt finding the test reads.
type huntFinding struct {
	SessionID string `json:"session_id"`
	Advisory  string `json:"advisory"`
	Package   string `json:"package"`
}

// hunt runs sandtrail hunt --format json: its findings and exit code.
func hunt(t *testing.T, e *env) ([]huntFinding, int) {
	t.Helper()
	out, err := e.cmd("hunt", "--format", "json").Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var h struct{ Findings []huntFinding }
	if err := json.Unmarshal(out, &h); err != nil {
		t.Fatalf("hunt output (exit %d): %v\n%s", code, err, out)
	}
	return h.Findings, code
}
