package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
)

// viewRow is the part of a `sandtrail packages --format json` row this
// test reads, decoded as a consumer of the command's output would.
type viewRow struct {
	Name      string   `json:"name"`
	Version   string   `json:"version"`
	Seen      string   `json:"seen"`
	Verified  *bool    `json:"verified"`
	Paths     []string `json:"paths"`
	BundledIn string   `json:"bundled_in"`
	Alerts    []string `json:"alerts"`
	Processes []struct {
		Argv  []string `json:"argv"`
		Cwd   string   `json:"cwd"`
		Match string   `json:"match"`
	} `json:"processes"`
}

// ranScript reports whether one of a row's processes is the npm
// lifecycle script that echoes word, run in a folder ending in dir.
func (r *viewRow) ranScript(word, dir string) bool {
	return slices.ContainsFunc(r.Processes, func(p struct {
		Argv  []string `json:"argv"`
		Cwd   string   `json:"cwd"`
		Match string   `json:"match"`
	}) bool {
		return p.Match == "npm_lifecycle" && strings.HasSuffix(p.Cwd, "/"+dir) && strings.Contains(strings.Join(p.Argv, " "), word)
	})
}

// TestBundledCopyRow: in a real session through the mirror, `npm install
// carrier inner@1.0.0` where carrier's tarball bundles its own
// inner@1.0.0 with a postinstall, and the registry's inner@1.0.0 has
// another. The bundled copy is a row of its own (seen bundled, bundled_in
// carrier's purl, at node_modules/carrier/node_modules/inner), verified
// through carrier's verified fetch and raising no unverified_install; its
// postinstall is charged to it, and the registry copy's to the registry
// copy's row, which the mirror's fetch joins. The carrier has its row.
func TestBundledCopyRow(t *testing.T) {
	t.Parallel()
	reg := npmtest.Start(t,
		npmtest.Package{Name: "carrier", Versions: []npmtest.Version{{Version: "1.0.0",
			Bundled: map[string]npmtest.Version{"inner": {Version: "1.0.0", Scripts: map[string]string{"postinstall": "echo bundled-postinstall"}}}}}},
		npmtest.Package{Name: "inner", Versions: []npmtest.Version{{Version: "1.0.0", Scripts: map[string]string{"postinstall": "echo registry-postinstall"}}}})
	e, pol := fixtureEnv(t, reg)
	r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", npmInstall("carrier@1.0.0 inner@1.0.0"))
	if r.code != 0 {
		t.Fatalf("npm install carrier inner: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	lock := lockPackages(t, r.stdout)
	if _, ok := lock["node_modules/carrier/node_modules/inner"]; !ok {
		t.Fatalf("npm did not install the bundled copy at node_modules/carrier/node_modules/inner: %v", lock)
	}
	id := r.summary.SessionID
	if n := reg.Count(npmtest.TarballPath("inner", "1.0.0")); n != 1 {
		t.Errorf("the registry's inner tarball was fetched %d times, want once (the bundled copy is not fetched)", n)
	}

	out, err := e.cmd("packages", "--session", id, "--format", "json").Output()
	if err != nil {
		t.Fatalf("sandtrail packages: %v", err)
	}
	var v struct {
		Packages []*viewRow     `json:"packages"`
		Alerts   []*event.Event `json:"alerts"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("sandtrail packages --format json: %v\n%s", err, out)
	}
	var carrier, bundled, registry *viewRow
	for _, p := range v.Packages {
		switch {
		case p.Name == "carrier":
			carrier = p
		case p.Name == "inner" && p.BundledIn != "":
			bundled = p
		case p.Name == "inner":
			registry = p
		}
	}
	rows, _ := json.MarshalIndent(v.Packages, "", " ")
	verified := func(p *viewRow) bool { return p.Verified != nil && *p.Verified }
	switch {
	case carrier == nil || bundled == nil || registry == nil:
		t.Fatalf("rows carrier %v, bundled inner %v, registry inner %v; want all three:\n%s\npkg events:\n%s",
			carrier != nil, bundled != nil, registry != nil, rows, e.pkgEvents(id))
	}
	if carrier.Seen != "shim+mirror" || !verified(carrier) || !slices.Equal(carrier.Paths, []string{"node_modules/carrier"}) {
		t.Errorf("carrier's row: seen %s, verified %v, paths %v; want shim+mirror, verified, at node_modules/carrier", carrier.Seen, verified(carrier), carrier.Paths)
	}
	const bundledPath = "node_modules/carrier/node_modules/inner"
	if bundled.Seen != "bundled" || bundled.BundledIn != "pkg:npm/carrier@1.0.0" || !verified(bundled) ||
		!slices.Equal(bundled.Paths, []string{bundledPath}) || len(bundled.Alerts) != 0 {
		t.Errorf("the bundled copy's row: seen %s, bundled_in %s, verified %v, paths %v, alerts %v; want bundled in pkg:npm/carrier@1.0.0, verified through it, at %s, no alert",
			bundled.Seen, bundled.BundledIn, verified(bundled), bundled.Paths, bundled.Alerts, bundledPath)
	}
	if !bundled.ranScript("bundled-postinstall", bundledPath) || bundled.ranScript("registry-postinstall", "node_modules/inner") {
		t.Errorf("the bundled copy's processes are not its postinstall alone:\n%s", rows)
	}
	if registry.Seen != "shim+mirror" || !verified(registry) || !slices.Equal(registry.Paths, []string{"node_modules/inner"}) {
		t.Errorf("the registry copy's row: seen %s, verified %v, paths %v; want shim+mirror, verified, at node_modules/inner", registry.Seen, verified(registry), registry.Paths)
	}
	if !registry.ranScript("registry-postinstall", "node_modules/inner") || registry.ranScript("bundled-postinstall", bundledPath) {
		t.Errorf("the registry copy's processes are not its postinstall alone:\n%s", rows)
	}
	// Neither the view nor the daemon's live rules raise a package alert.
	for _, a := range append(v.Alerts, kinds(e.events(id), event.KindAlert)...) {
		if a.Alert != nil && (a.Alert.RuleID == "unverified_install" || a.Alert.RuleID == "shim_mirror_mismatch") {
			t.Errorf("alert %s: %s", a.Alert.RuleID, a.Alert.Summary)
		}
	}
	e.verify()
}
