package e2e

import (
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// TestMirrorSeesBypass: the mirror names the process behind each fetch
// (the kernel's record of its connect) and raises shim_bypass for a
// session's process with no live shim among its ancestors, whatever the
// manager: npm run by its absolute path fetches around its shim and is
// caught; the same npm through the shim is not.
func TestMirrorSeesBypass(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	script := `set -e
mkdir -p "$HOME/a" "$HOME/b"
cd "$HOME/a" && echo '{"name":"a","version":"1.0.0"}' >package.json
npm install --no-audit --no-fund --no-update-notifier left-pad@1.3.0 >npm.out 2>&1 || { cat npm.out; exit 3; }
cd "$HOME/b" && echo '{"name":"b","version":"1.0.0"}' >package.json
/usr/bin/npm install --no-audit --no-fund --no-update-notifier is-number@7.0.0 >npm.out 2>&1 || { cat npm.out; exit 4; }
`
	r := e.run("--user", "nobody", "--timeout", "5m", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("session: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	evs := e.events(r.summary.SessionID)
	var mirrorAlerts []*event.Event
	fetchPid := map[string]int32{}
	for _, ev := range evs {
		switch {
		case ev.Kind == event.KindAlert && ev.Alert.RuleID == "shim_bypass" && strings.Contains(ev.Alert.Summary, "through the mirror"):
			mirrorAlerts = append(mirrorAlerts, ev)
		case ev.Kind == event.KindPkgFetch && ev.Source == event.SourceMirror && ev.Proc != nil:
			fetchPid[ev.Pkg.Name] = ev.Proc.Pid
		}
	}
	if fetchPid["left-pad"] == 0 || fetchPid["is-number"] == 0 {
		t.Fatalf("pkg.fetch names no process: left-pad %d, is-number %d", fetchPid["left-pad"], fetchPid["is-number"])
	}
	var caught bool
	for _, a := range mirrorAlerts {
		if strings.Contains(a.Alert.Summary, "left-pad") || a.Proc.Pid == fetchPid["left-pad"] {
			t.Errorf("the shimmed npm raised a mirror shim_bypass: %s", a.Alert.Summary)
		}
		if a.Proc.Pid == fetchPid["is-number"] {
			caught = true
		}
	}
	if !caught {
		t.Errorf("npm run by its path fetched is-number around its shim and no mirror shim_bypass names it (alerts: %d)", len(mirrorAlerts))
	}
	e.verify()
}
