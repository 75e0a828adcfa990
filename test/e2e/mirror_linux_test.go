package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
)

// npmInstall is a session script: npm install ARGS in a new project
// directory of the session's home, then the project's package-lock.json
// on stdout after a marker line.
func npmInstall(args string) string {
	return `set -e; mkdir -p "$HOME/p" && cd "$HOME/p" && echo '{"name":"p","version":"1.0.0"}' >package.json
npm install --no-audit --no-fund --no-update-notifier ` + args + ` >npm.out 2>&1 || { cat npm.out; exit 3; }
echo LOCKFILE; cat package-lock.json`
}

// lockPackages reads the packages of the package-lock.json that follows
// LOCKFILE in out: install path → version, resolved URL and integrity.
func lockPackages(t *testing.T, out string) map[string]struct{ Version, Resolved, Integrity string } {
	t.Helper()
	_, lock, ok := strings.Cut(out, "LOCKFILE\n")
	if !ok {
		t.Fatalf("no lockfile in the session output:\n%s", out)
	}
	var l struct {
		Packages map[string]struct{ Version, Resolved, Integrity string } `json:"packages"`
	}
	if err := json.Unmarshal([]byte(lock), &l); err != nil {
		t.Fatalf("package-lock.json: %v", err)
	}
	delete(l.Packages, "")
	return l.Packages
}

// pkgEvents prints a session's pkg events, for a failure message.
func (e *env) pkgEvents(id string) string {
	var b strings.Builder
	for _, ev := range e.events(id) {
		if ev.Pkg != nil {
			j, _ := json.Marshal(ev.Pkg)
			fmt.Fprintf(&b, "%s %s\n", ev.Kind, j)
		}
	}
	return b.String()
}

// fetches returns the session's pkg.fetch events by name@version.
func fetches(evs []*event.Event) map[string][]*event.Pkg {
	out := map[string][]*event.Pkg{}
	for _, e := range kinds(evs, event.KindPkgFetch) {
		out[e.Pkg.Name+"@"+e.Pkg.Resolved] = append(out[e.Pkg.Name+"@"+e.Pkg.Resolved], e.Pkg)
	}
	return out
}

// TestMirrorNpmRegistry is issue 12's npm case against the real registry:
// a real `npm install` of express through the mirror that `sandtrail run`
// hosts; every tarball is verified and recorded in the session, with the
// hash npm wrote into its lockfile. Then, with the upstream cut off, a
// second install in a fresh directory is served wholly from the cache.
func TestMirrorNpmRegistry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("--user", "nobody", "--timeout", "5m", "--", "sh", "-c", npmInstall("express@4"))
	if r.code != 0 {
		t.Fatalf("npm install through the mirror: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	pkgs := lockPackages(t, r.stdout)
	if len(pkgs) < 50 {
		t.Fatalf("the lockfile has %d packages, want express's tree", len(pkgs))
	}
	byID := fetches(e.events(r.summary.SessionID))
	for path, p := range pkgs {
		name := strings.TrimPrefix(path[strings.LastIndex(path, "node_modules/"):], "node_modules/")
		f := byID[name+"@"+p.Version]
		if len(f) == 0 {
			t.Errorf("%s@%s: no pkg.fetch in the session", name, p.Version)
			continue
		}
		if got := f[0]; got.Outcome != "served" || got.Verified == nil || !*got.Verified || got.Hash != p.Integrity ||
			!strings.HasPrefix(got.SourceURL, "https://registry.npmjs.org/") || got.Cache != "miss" {
			t.Errorf("%s@%s: pkg.fetch %+v, want served, verified, hash %s, from the registry", name, p.Version, *got, p.Integrity)
		}
		if !strings.Contains(p.Resolved, "/npm/") {
			t.Errorf("%s: the lockfile resolved it from %s, not the mirror", name, p.Resolved)
		}
	}
	t.Logf("%d packages installed through the mirror, each verified", len(pkgs))

	// The upstream cut off: the mirror's upstream connections go to a
	// closed port (HTTPS_PROXY, which only the mirror's https upstream
	// uses; NO_PROXY keeps npm's own requests to the mirror direct), and its
	// metadata is always stale.
	e.env = append(e.env, "HTTPS_PROXY=http://127.0.0.1:9", "NO_PROXY=127.0.0.1", "SANDTRAIL_MIRROR_META_TTL=1ns")
	r2 := e.run("--user", "nobody", "--timeout", "5m", "--", "sh", "-c", npmInstall("express@4"))
	if r2.code != 0 {
		t.Fatalf("npm install with the upstream cut off: exit %d\n%s\n%s", r2.code, r2.stdout, r2.stderr)
	}
	pkgs2 := lockPackages(t, r2.stdout)
	byID2 := fetches(e.events(r2.summary.SessionID))
	for path, p := range pkgs2 {
		name := strings.TrimPrefix(path[strings.LastIndex(path, "node_modules/"):], "node_modules/")
		f := byID2[name+"@"+p.Version]
		if len(f) == 0 || f[0].Outcome != "served" || f[0].Cache != "hit" || !f[0].MetadataStale {
			t.Errorf("%s@%s with the upstream cut off: %v, want served from the cache on stale metadata", name, p.Version, f)
		}
	}
	if len(pkgs2) != len(pkgs) {
		t.Errorf("the second install has %d packages, the first %d", len(pkgs2), len(pkgs))
	}
	e.verify()
}

// fixtureEnv is an env whose runs' mirror uses reg as its npm upstream,
// with a policy that approves it and a 48h cooldown.
func fixtureEnv(t *testing.T, reg *npmtest.Registry) (*env, string) {
	e := newEnv(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("mirror:\n  upstreams:\n    npm: %s/\n", reg.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "SANDTRAIL_CONFIG="+cfg)
	pol := writePolicy(t, fmt.Sprintf("sources:\n  registries:\n    npm: [%s/]\ncooldown:\n  min_age: 48h\n  action: block\n", reg.URL))
	return e, pol
}

// TestMirrorNpmFixture: from a loopback fixture upstream, a tarball that
// does not match its integrity makes npm install fail and is recorded as
// hash_mismatch; a wrong signature as signature_invalid; a version inside
// the cooldown is hidden (a range resolves below it; pinning it fails) and
// the filtering names the rule.
func TestMirrorNpmFixture(t *testing.T) {
	t.Parallel()
	old, fresh := time.Now().Add(-30*24*time.Hour), time.Now().Add(-time.Hour)
	reg := npmtest.Start(t,
		npmtest.Package{Name: "tampered", Versions: []npmtest.Version{{Version: "1.0.0", Published: old}}},
		npmtest.Package{Name: "badsig", Versions: []npmtest.Version{{Version: "1.0.0", Published: old}}},
		npmtest.Package{Name: "cool", Versions: []npmtest.Version{{Version: "1.0.0", Published: old}, {Version: "1.1.0", Published: fresh}}})
	reg.Tamper("tampered", "1.0.0")
	reg.BadSignature("badsig", "1.0.0")
	e, pol := fixtureEnv(t, reg)
	outcome := func(id, name string) []string {
		var got []string
		for _, ev := range kinds(e.events(id), event.KindPkgFetch) {
			if ev.Pkg.Name == name {
				got = append(got, ev.Pkg.Outcome)
			}
		}
		return got
	}
	for _, tc := range []struct{ name, want string }{{"tampered", "hash_mismatch"}, {"badsig", "signature_invalid"}} {
		r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", npmInstall(tc.name+"@1.0.0"))
		if r.code == 0 {
			t.Errorf("npm install %s: exit 0, want a failure\n%s", tc.name, r.stdout)
		}
		if !strings.Contains(r.stdout, tc.want) {
			t.Errorf("npm's output for %s does not name %s:\n%s", tc.name, tc.want, r.stdout)
		}
		if got := outcome(r.summary.SessionID, tc.name); len(got) == 0 || got[0] != tc.want {
			t.Errorf("%s: pkg.fetch outcomes %v, want %s", tc.name, got, tc.want)
		}
	}
	// The cooldown: a range resolves to the older version.
	r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", npmInstall("cool@^1.0.0"))
	if r.code != 0 {
		t.Fatalf("npm install cool@^1.0.0: exit %d\n%s\n%s", r.code, r.stdout, e.pkgEvents(r.summary.SessionID))
	}
	if v := lockPackages(t, r.stdout)["node_modules/cool"].Version; v != "1.0.0" {
		t.Errorf("cool@^1.0.0 resolved to %s, want 1.0.0 (1.1.0 is inside the cooldown)", v)
	}
	var filter *event.Pkg
	for _, ev := range kinds(e.events(r.summary.SessionID), event.KindPkgFilter) {
		filter = ev.Pkg
	}
	if filter == nil || len(filter.Removed) != 1 || filter.Removed[0].Version != "1.1.0" || filter.Removed[0].Rule != "cooldown.min_age" {
		t.Errorf("pkg.filter = %+v, want 1.1.0 removed by cooldown.min_age", filter)
	}
	r = e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", npmInstall("cool@1.1.0"))
	if r.code == 0 || !strings.Contains(r.stdout, "No matching version") {
		t.Errorf("a pinned install of the version inside the cooldown: exit %d, want npm's no-matching-version failure\n%s", r.code, r.stdout)
	}
	if n := reg.Count(npmtest.TarballPath("cool", "1.1.0")); n != 0 {
		t.Errorf("the fixture served the hidden version's tarball %d times", n)
	}
	e.verify()
}
