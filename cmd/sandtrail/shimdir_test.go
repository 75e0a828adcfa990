package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
)

// TestViewsTakeTheConfiguredShimDir: sandtrail packages joins a session's
// packages with the configured shim_dir, as the daemon's live rules do, and
// timeline's rows are the same join. Session P's npm ran from
// /usr/local/lib/sandtrail/shims: with that shim_dir it is the shim, and
// with another the real npm under it ran with no shim above it, a bypass.
func TestViewsTakeTheConfiguredShimDir(t *testing.T) {
	data := t.TempDir()
	queryFixture(t, data, packagesEvents())
	bypassed := func(shimDir string) bool {
		t.Helper()
		t.Setenv("SANDTRAIL_SHIM_DIR", shimDir)
		out, err := queryCLI(t, "--data", data, "packages", "--session", "P", "--format", "json")
		if err != nil {
			t.Fatalf("packages with shim_dir %s: %v", shimDir, err)
		}
		var v pkgview.View
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		bypass := slices.ContainsFunc(v.Alerts, func(a *event.Event) bool { return a.Alert.RuleID == pkgview.RuleBypass })
		out, err = queryCLI(t, "--data", data, "timeline", "P", "--format", "json")
		if err != nil {
			t.Fatalf("timeline with shim_dir %s: %v", shimDir, err)
		}
		var tl struct{ Packages []*pkgview.Package }
		if err := json.Unmarshal([]byte(out), &tl); err != nil {
			t.Fatal(err)
		}
		rows, _ := json.Marshal(v.Packages)
		tlRows, _ := json.Marshal(tl.Packages)
		if string(rows) != string(tlRows) {
			t.Errorf("shim_dir %s: timeline's packages\n%s\nwant packages' rows\n%s", shimDir, tlRows, rows)
		}
		return bypass
	}
	if bypassed("/usr/local/lib/sandtrail/shims") {
		t.Errorf("packages with the shims' own directory as shim_dir: a bypass alert, want none")
	}
	if !bypassed("/opt/elsewhere/shims") {
		t.Errorf("packages with another shim_dir: no bypass alert, want the real npm taken for a bypass")
	}
}
