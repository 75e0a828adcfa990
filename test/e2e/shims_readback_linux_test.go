package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
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
