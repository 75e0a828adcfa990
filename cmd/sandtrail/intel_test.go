package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/policies/intel"
)

// evilRecord lists packagesEvents' npm evil@1.0.0, and its C2 address.
const evilRecord = `{"id":"MAL-2026-77","modified":"2026-11-30T00:00:00Z","summary":"Malicious code in evil (npm)",
"affected":[{"package":{"ecosystem":"npm","name":"evil"},"versions":["1.0.0"]}],
"database_specific":{"iocs":{"ip_addresses":["203.0.113.9"]}}}`

// TestIntelImportAndHunt: with no daemon running, import stores the
// record and re-hunts: it journals one alert per session, record and
// package; hunt finds the session with what evil's postinstall did and
// exits 6; a second import raises nothing again; a withdrawal makes hunt
// find nothing, while the alerts stay in the journal.
func TestIntelImportAndHunt(t *testing.T) {
	data := t.TempDir()
	queryFixture(t, data, packagesEvents())
	t.Setenv("SANDTRAIL_KEY_FILE", filepath.Join(data, "test.key"))
	t.Setenv("SANDTRAIL_ORIGIN", "sandtrail/query-test")
	t.Setenv("SANDTRAIL_SOCKET", filepath.Join(t.TempDir(), "ingest.sock")) // no daemon there
	src := filepath.Join(t.TempDir(), "osv", "malicious", "npm", "evil", "MAL-2026-77.json")
	writeTestFile(t, src, evilRecord)
	var res importResult
	importJSON := func(path string) {
		t.Helper()
		out, err := queryCLI(t, "--data", data, "intel", "import", path, "--format", "json")
		if err != nil {
			t.Fatalf("intel import: %v\n%s", err, out)
		}
		res = importResult{}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("intel import output: %v\n%s", err, out)
		}
	}
	importJSON(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(src)))))
	if res.Counts.Kept != 1 || res.Rehunt == nil || res.Rehunt.Sessions != 1 || res.Rehunt.Alerts != 2 || res.Rehunt.Via != "journal" {
		t.Fatalf("first import = %+v %+v, want 1 kept and 2 alerts (the version, the address) in one session, into the journal", res.Counts, res.Rehunt)
	}
	out, err := queryCLI(t, "--data", data, "hunt", "--format", "json")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitFound {
		t.Fatalf("hunt = %v, want exit %d\n%s", err, exitFound, out)
	}
	var h struct{ Findings []huntFinding }
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatal(err)
	}
	var pkg *huntFinding
	for i, f := range h.Findings {
		if f.SessionID != "P" || f.Advisory != "MAL-2026-77" || !f.Alerted {
			t.Errorf("finding %+v, want session P, MAL-2026-77, alerted", f)
		}
		if f.Match == intel.MatchPackage {
			pkg = &h.Findings[i]
		}
	}
	if pkg == nil || pkg.Package != "pkg:npm/evil@1.0.0" || pkg.Scripts == nil || len(pkg.Scripts.Processes) == 0 || len(pkg.Scripts.Connections) == 0 {
		t.Fatalf("package finding = %+v, want evil@1.0.0 with its postinstall's process and connection", pkg)
	}
	out, _ = queryCLI(t, "--data", data, "hunt")
	t.Logf("hunt:\n%s", out)
	if !strings.Contains(out, "MAL-2026-77") || !strings.Contains(out, "process 12 sh -c 'node install.js'") || !strings.Contains(out, "203.0.113.9") {
		t.Errorf("hunt's table does not show the finding with the postinstall's process and connection:\n%s", out)
	}
	out, err = queryCLI(t, "--data", data, "query", "--kind", "alert", "--format", "json")
	if err != nil || strings.Count(out, `"rule_id":"known_malicious"`) != 2 || !strings.Contains(out, `"advisory":"MAL-2026-77"`) {
		t.Fatalf("the journal's known_malicious alerts (%v):\n%s", err, out)
	}
	importJSON(src)
	if res.Rehunt.Alerts != 0 || res.Counts.Unchanged != 1 {
		t.Errorf("second import = %+v %+v, want the record unchanged and no alert raised again", res.Counts, res.Rehunt)
	}
	withdrawn := filepath.Join(t.TempDir(), "osv", "withdrawn", "npm", "evil", "MAL-2026-77.json")
	writeTestFile(t, withdrawn, evilRecord)
	importJSON(filepath.Dir(withdrawn))
	if res.Counts.Removed != 1 {
		t.Errorf("withdrawing import = %+v, want the record removed", res.Counts)
	}
	if out, err := queryCLI(t, "--data", data, "hunt"); err != nil || !strings.Contains(out, "no session matches") {
		t.Errorf("hunt after the withdrawal = %v, want no findings\n%s", err, out)
	}
	if out, _ := queryCLI(t, "--data", data, "query", "--kind", "alert", "--format", "json"); strings.Count(out, `"rule_id":"known_malicious"`) != 2 {
		t.Errorf("the alerts left the journal after the withdrawal:\n%s", out)
	}
	if out, err := queryCLI(t, "--data", data, "intel", "show", "MAL-2026-77"); err == nil {
		t.Errorf("intel show of a withdrawn record = %s, want an error", out)
	}
}

func writeTestFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
