package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
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
	for _, p := range e.packagesView(r.summary.SessionID).Packages {
		if p.Seen != pkgview.SeenBoth {
			t.Errorf("%s@%s: seen %s, want %s", p.Name, p.Version, p.Seen, pkgview.SeenBoth)
		}
	}
}
