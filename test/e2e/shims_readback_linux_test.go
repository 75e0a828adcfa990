package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/registry-mirror/crates/cratestest"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
	"github.com/sandtrail/sandtrail/registry-mirror/pypi/pypitest"
)

// installsByRun groups a session's pkg.install events by the real
// manager's pid, in the order the runs first recorded one.
func installsByRun(evs []*event.Event) [][]*event.Pkg {
	var pids []int32
	by := map[int32][]*event.Pkg{}
	for _, e := range kinds(evs, event.KindPkgInstall) {
		pid := e.Pkg.ManagerPid
		if _, ok := by[pid]; !ok {
			pids = append(pids, pid)
		}
		by[pid] = append(by[pid], e.Pkg)
	}
	var out [][]*event.Pkg
	for _, pid := range pids {
		out = append(out, by[pid])
	}
	return out
}

// npmFlags keep npm's output to what the tests read.
const npmFlags = "--no-audit --no-fund --no-update-notifier"

// TestShimNpmFromLockfile: the installs an agent runs in every repository
// it clones, from a lockfile it did not write through the shim: `npm ci`,
// and `npm install` where package-lock.json exists and node_modules does
// not. Each gives one pkg.install per package of the lockfile, through
// the real registry and the mirror, and each package is shim+mirror in
// `sandtrail packages`. (The lockfile's own `--package-lock-only` run
// installs nothing and is reported as nothing.)
func TestShimNpmFromLockfile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	script := `set -e; mkdir -p "$HOME/p" && cd "$HOME/p" && echo '{"name":"p","version":"1.0.0"}' >package.json
run() { "$@" >npm.out 2>&1 || { cat npm.out; exit 3; }; }
run npm install ` + npmFlags + ` --package-lock-only left-pad@^1.3.0 express@4
run npm ci ` + npmFlags + `
rm -rf node_modules
run npm install ` + npmFlags + `
echo LOCKFILE; cat package-lock.json`
	r := e.run("--user", "nobody", "--timeout", "5m", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("npm ci and npm install from the lockfile: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	pkgs := lockPackages(t, r.stdout)
	runs := installsByRun(e.events(r.summary.SessionID))
	if len(runs) != 2 {
		t.Fatalf("pkg.install events from %d npm runs, want 2 (npm ci, npm install)\n%s", len(runs), e.pkgEvents(r.summary.SessionID))
	}
	for i, what := range []string{"npm ci", "npm install"} {
		got := map[string]*event.Pkg{}
		for _, p := range runs[i] {
			got[p.Name+"@"+p.Resolved] = p
		}
		if len(runs[i]) != len(pkgs) || len(got) != len(pkgs) {
			t.Errorf("%s: %d pkg.install events (%d packages), want one per package of the lockfile's %d", what, len(runs[i]), len(got), len(pkgs))
		}
		for path, lp := range pkgs {
			name := path[strings.LastIndex(path, "node_modules/")+len("node_modules/"):]
			p := got[name+"@"+lp.Version]
			if p == nil {
				t.Errorf("%s: no pkg.install of %s@%s", what, name, lp.Version)
				continue
			}
			direct := name == "left-pad" || name == "express"
			if p.Hash != lp.Integrity || p.SourceURL != lp.Resolved || p.Direct == nil || *p.Direct != direct {
				t.Errorf("%s: %s: hash %s from %s, direct %v; lockfile %s from %s, direct %v", what, name, p.Hash, p.SourceURL, p.Direct, lp.Integrity, lp.Resolved, direct)
			}
			if name == "left-pad" && p.Requested != "^1.3.0" {
				t.Errorf("%s: left-pad requested %q, want package.json's ^1.3.0", what, p.Requested)
			}
		}
	}
	v := e.packagesView(r.summary.SessionID)
	for _, p := range v.Packages {
		if p.Seen != pkgview.SeenBoth {
			t.Errorf("%s@%s: seen %s, want %s", p.Name, p.Version, p.Seen, pkgview.SeenBoth)
		}
	}
	if i := slices.IndexFunc(v.Packages, func(p *pkgview.Package) bool { return p.Name == "express" }); i < 0 {
		t.Errorf("no express row in the packages view")
	}
	// npm install took every package from npm's cache, which npm ci
	// filled through the mirror in this session: no alert.
	noAlerts(t, e, r.summary.SessionID, v)
	e.verify()
}

// TestShimPipRequireHashes: `pip install -r requirements.txt
// --require-hashes` of a fully pinned, hashed file (a dependency pinned
// next to the package that needs it) from the fixture index gives one
// pkg.install per package pip installed, each with the file's spec, the
// sha256 the file pins and shim+mirror in `sandtrail packages`.
func TestShimPipRequireHashes(t *testing.T) {
	t.Parallel()
	e, _, pol := pipEnv(t)
	sum := func(name, version string, deps ...string) string {
		return pypitest.SHA256(pypitest.Wheel(name, pypitest.Version{Version: version, Deps: deps}))
	}
	reqs := "fixture-pkg==1.5 --hash=sha256:" + sum("fixture-pkg", "1.5", "fixture-dep>=0.1") + "\n" +
		"fixture-dep==0.1 \\\n    --hash=sha256:" + sum("fixture-dep", "0.1") + "\n"
	script := `cd "$HOME" && printf '%s' '` + reqs + `' >requirements.txt && ` + pipInstall("-r requirements.txt --require-hashes")
	r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("pip install -r requirements.txt --require-hashes: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	evs := e.events(r.summary.SessionID)
	ins := kinds(evs, event.KindPkgInstall)
	want := map[string]string{"fixture-pkg@1.5": sum("fixture-pkg", "1.5", "fixture-dep>=0.1"), "fixture-dep@0.1": sum("fixture-dep", "0.1")}
	if len(ins) != len(want) {
		t.Errorf("%d pkg.install events, want %d\n%s", len(ins), len(want), e.pkgEvents(r.summary.SessionID))
	}
	for _, in := range ins {
		p := in.Pkg
		id := p.Name + "@" + p.Resolved
		h, ok := want[id]
		if !ok || p.Hash != "sha256:"+h || p.Requested != "=="+p.Resolved || p.Direct == nil || !*p.Direct {
			t.Errorf("%s: pkg.install %+v, want requested ==%s, direct, hash sha256:%s", id, *p, p.Resolved, h)
		}
	}
	v := e.packagesView(r.summary.SessionID)
	for _, p := range v.Packages {
		if p.Seen != pkgview.SeenBoth {
			t.Errorf("%s@%s: seen %s, want %s", p.Name, p.Version, p.Seen, pkgview.SeenBoth)
		}
	}
	noAlerts(t, e, r.summary.SessionID, v)
}

// TestShimCargoLocked: `cargo build --locked` of a project whose
// Cargo.lock exists gives one pkg.install per crate it builds from, each
// joined shim+mirror (`cargo generate-lockfile`, which downloads
// nothing, gives none); a second `cargo build --locked` after `rm -rf
// target`, whose crates are all in the cache already, gives them again.
func TestShimCargoLocked(t *testing.T) {
	t.Parallel()
	tc := rustToolchain(t)
	leafDep := []cratestest.Dep{{Name: "fx-leaf", Req: "^1"}}
	crates := []cratestest.Crate{
		{Name: "fx-leaf", Versions: []cratestest.Version{{Version: "1.0.0"}}},
		{Name: "fx-mid", Versions: []cratestest.Version{{Version: "0.2.1", Deps: leafDep}}},
	}
	ix := cratestest.Start(t, crates...)
	e := newEnv(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("mirror:\n  upstreams:\n    cargo: "+ix.URL+"/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "SANDTRAIL_CONFIG="+cfg)
	pol := writePolicy(t, "sources:\n  registries:\n    cargo: ["+ix.URL+"/]\n")
	script := `set -e; mkdir -p "$HOME/p/src" && cd "$HOME/p"
printf '[package]\nname = "p"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nfx-mid = "0.2"\n' >Cargo.toml
echo 'pub use fx_mid::version;' >src/lib.rs
run() { "$@" >cargo.out 2>&1 || { cat cargo.out; exit 3; }; }
run cargo generate-lockfile
run cargo build --locked
rm -rf target
date +%s%N >second
run cargo build --locked`
	args := append([]string{"--user", "nobody", "--timeout", "10m", "--policy", pol}, cargoEnv(tc)...)
	r := e.run(append(args, "--", "sh", "-c", script)...)
	if r.code != 0 {
		t.Fatalf("cargo build --locked through the shim: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// The second build's pkg.install events are those after the time
	// the session wrote before it ran.
	b, err := os.ReadFile(filepath.Join(r.summary.Workdir, "p", "second"))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("the second build's start: %v", err)
	}
	second := time.Unix(0, ns)
	var builds [2][]*event.Pkg
	for _, in := range kinds(e.events(r.summary.SessionID), event.KindPkgInstall) {
		i := 0
		if in.TS.After(second) {
			i = 1
		}
		builds[i] = append(builds[i], in.Pkg)
	}
	want := map[string]string{"fx-mid@0.2.1": "", "fx-leaf@1.0.0": "fx-mid"}
	for i, b := range builds {
		got := map[string]*event.Pkg{}
		for _, p := range b {
			got[p.Name+"@"+p.Resolved] = p
		}
		if len(b) != len(want) || len(got) != len(want) {
			t.Errorf("build %d: %d pkg.install events, want one per crate: %v\n%s", i+1, len(b), want, e.pkgEvents(r.summary.SessionID))
		}
		for id, by := range want {
			if p := got[id]; p == nil || p.RequestedBy != by || !strings.HasPrefix(p.Hash, "sha256:") {
				t.Errorf("build %d: %s: pkg.install %+v, want requested_by %q and a sha256", i+1, id, p, by)
			}
		}
	}
	v := e.packagesView(r.summary.SessionID)
	for _, p := range v.Packages {
		if p.Seen != pkgview.SeenBoth {
			t.Errorf("%s@%s: seen %s, want %s", p.Name, p.Version, p.Seen, pkgview.SeenBoth)
		}
	}
	noAlerts(t, e, r.summary.SessionID, v)
}

// noAlerts fails t for every alert the daemon's live rules journaled in
// the session, and every package rule's alert of its view. (`sandtrail
// packages` runs the view with the default shim directory, so in these
// tests, whose shims are elsewhere, it takes them for bypasses: its
// shim_bypass alerts are not counted.)
func noAlerts(t *testing.T, e *env, id string, v *pkgview.View) {
	t.Helper()
	for _, a := range kinds(e.events(id), event.KindAlert) {
		t.Errorf("alert in the record: %s: %s", a.Alert.RuleID, a.Alert.Summary)
	}
	for _, a := range v.Alerts {
		if a.Alert.RuleID != pkgview.RuleBypass {
			t.Errorf("alert %s: %s", a.Alert.RuleID, a.Alert.Summary)
		}
	}
}

// TestUnverifiedInstall: an npm install whose --registry names a loopback
// registry directly, around the mirror (the policy approves the
// registry, so the shim lets it run), is claimed by the shim and raises
// unverified_install for each package, live in the record and in
// `sandtrail packages`: no verified fetch of the mirror's accounts for
// its bytes.
func TestUnverifiedInstall(t *testing.T) {
	t.Parallel()
	old := time.Now().Add(-30 * 24 * time.Hour)
	reg := npmtest.Start(t,
		npmtest.Package{Name: "fx-direct", Versions: []npmtest.Version{{Version: "1.0.0", Published: old, Deps: map[string]string{"fx-dep": "^2"}}}},
		npmtest.Package{Name: "fx-dep", Versions: []npmtest.Version{{Version: "2.0.0", Published: old}}})
	e := newEnv(t)
	pol := writePolicy(t, "sources:\n  registries:\n    npm: ["+reg.URL+"/, https://registry.npmjs.org/]\n")
	r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", npmInstall("--registry "+reg.URL+"/ fx-direct@1.0.0"))
	if r.code != 0 {
		t.Fatalf("npm install --registry: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	v := e.packagesView(r.summary.SessionID)
	got := map[string]bool{}
	n := 0
	for _, a := range v.Alerts {
		if a.Alert.RuleID == pkgview.RuleBypass {
			continue // the view's default shim directory: see noAlerts
		}
		n++
		if a.Alert.RuleID == pkgview.RuleUnverified {
			got[a.Alert.Summary[strings.Index(a.Alert.Summary, "fx-"):strings.Index(a.Alert.Summary, " was installed")]] = true
		}
	}
	if !got["fx-direct@1.0.0"] || !got["fx-dep@2.0.0"] || n != 2 {
		t.Errorf("alerts %v, want unverified_install for fx-direct@1.0.0 and fx-dep@2.0.0 only", alertSummaries(v))
	}
	live := 0
	for _, a := range kinds(e.events(r.summary.SessionID), event.KindAlert) {
		if a.Alert.RuleID == pkgview.RuleUnverified {
			live++
		}
	}
	if live != 2 {
		t.Errorf("%d unverified_install alerts in the record, want 2 (the daemon's live rule)", live)
	}
}

func alertSummaries(v *pkgview.View) []string {
	var out []string
	for _, a := range v.Alerts {
		out = append(out, a.Alert.RuleID+": "+a.Alert.Summary)
	}
	return out
}

// TestShimNpmRequestedBy: an eslint, typescript and webpack install
// through the real registry and the mirror; every pkg.install's
// required_by names exactly the packages of the hidden lockfile whose
// dependencies resolve to it by node_modules path rules (nested copies
// included, each at its own install path), requested_by is the first of
// them, and the session raises no alert.
func TestShimNpmRequestedBy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	script := `set -e; mkdir -p "$HOME/p" && cd "$HOME/p" && echo '{"name":"p","version":"1.0.0"}' >package.json
npm install ` + npmFlags + ` eslint typescript webpack >npm.out 2>&1 || { cat npm.out; exit 3; }
echo LOCKFILE; cat node_modules/.package-lock.json`
	r := e.run("--user", "nobody", "--timeout", "8m", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("npm install eslint typescript webpack: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	_, lock, _ := strings.Cut(r.stdout, "LOCKFILE\n")
	var l struct {
		Packages map[string]struct {
			Name                                                 string
			Dependencies, OptionalDependencies, PeerDependencies map[string]string
		} `json:"packages"`
	}
	if err := json.Unmarshal([]byte(lock), &l); err != nil {
		t.Fatalf("the hidden lockfile: %v", err)
	}
	name := func(p string) string {
		if n := l.Packages[p].Name; n != "" {
			return n
		}
		return p[strings.LastIndex(p, "node_modules/")+len("node_modules/"):]
	}
	// resolve walks up from the package at path from, as node does.
	resolve := func(from, dep string) string {
		for dir := from; ; {
			cand := dir + "/node_modules/" + dep
			if dir == "" {
				cand = "node_modules/" + dep
			}
			if _, ok := l.Packages[cand]; ok {
				return cand
			}
			if dir == "" {
				return ""
			}
			if i := strings.LastIndex(dir, "/node_modules/"); i >= 0 {
				dir = dir[:i]
			} else {
				dir = ""
			}
		}
	}
	parents := map[string][]string{}
	for p, ent := range l.Packages {
		for _, deps := range []map[string]string{ent.Dependencies, ent.OptionalDependencies, ent.PeerDependencies} {
			for d := range deps {
				if c := resolve(p, d); c != "" && !slices.Contains(parents[c], name(p)) {
					parents[c] = append(parents[c], name(p))
				}
			}
		}
	}
	got := map[string]*event.Pkg{}
	ins := kinds(e.events(r.summary.SessionID), event.KindPkgInstall)
	for _, in := range ins {
		got[in.Pkg.Path] = in.Pkg
	}
	if len(ins) < 100 || len(ins) != len(l.Packages) {
		t.Errorf("%d pkg.install events, the hidden lockfile has %d packages; want one each (over 100)", len(ins), len(l.Packages))
	}
	nested := 0
	for p := range l.Packages {
		if strings.Count(p, "node_modules/") > 1 {
			nested++
		}
	}
	checked := 0
	for p := range l.Packages {
		if p == "" {
			continue
		}
		want := slices.Sorted(slices.Values(parents[p]))
		in := got[p]
		if in == nil {
			t.Errorf("%s: no pkg.install at that install path", p)
			continue
		}
		checked++
		if !slices.Equal(in.RequiredBy, want) {
			t.Errorf("%s: required_by %q, want the lockfile's parents %q", p, in.RequiredBy, want)
		}
		if first := ""; len(want) > 0 && in.RequestedBy != want[0] || len(want) == 0 && in.RequestedBy != first {
			t.Errorf("%s: requested_by %q, want the first of %q", p, in.RequestedBy, want)
		}
	}
	if nested == 0 || checked != len(ins) {
		t.Errorf("%d nested copies, %d of %d pkg.install events checked: want nested copies, and every event checked", nested, checked, len(ins))
	}
	t.Logf("%d packages (%d nested), required_by checked for %d", len(l.Packages), nested, checked)
	noAlerts(t, e, r.summary.SessionID, e.packagesView(r.summary.SessionID))
}

// lockField is the JSON of the entry at path p of a lockfile's packages.
func lockField(lock, p string) string {
	var l struct {
		Packages map[string]json.RawMessage `json:"packages"`
	}
	json.Unmarshal([]byte(lock), &l)
	return string(l.Packages[p])
}
