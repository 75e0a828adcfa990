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
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
	"github.com/sandtrail/sandtrail/registry-mirror/pypi/pypitest"
)

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

// installs are the session's pkg.install events by name@version.
func installs(evs []*event.Event) map[string]*event.Event {
	out := map[string]*event.Event{}
	for _, e := range kinds(evs, event.KindPkgInstall) {
		out[e.Pkg.Name+"@"+e.Pkg.Resolved] = e
	}
	return out
}

// pipEnv is an env whose runs' mirror uses a loopback fixture index as its
// PyPI upstream, with a policy that approves it: fixture-pkg 1.0 and 1.5
// (which requires fixture-dep) and 2.0.
func pipEnv(t *testing.T) (*env, *pypitest.Index, string) {
	old := time.Now().Add(-30 * 24 * time.Hour)
	ix := pypitest.Start(t,
		pypitest.Project{Name: "fixture-pkg", Versions: []pypitest.Version{{Version: "1.0", Uploaded: old},
			{Version: "1.5", Uploaded: old, Deps: []string{"fixture-dep>=0.1"}}, {Version: "2.0", Uploaded: old}}},
		pypitest.Project{Name: "fixture-dep", Versions: []pypitest.Version{{Version: "0.1", Uploaded: old}}})
	e := newEnv(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("mirror:\n  upstreams:\n    pypi: "+ix.SimpleURL()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "SANDTRAIL_CONFIG="+cfg)
	pol := writePolicy(t, "sources:\n  registries:\n    pypi: ["+ix.SimpleURL()+", "+ix.Files.URL+"/packages/]\n")
	return e, ix, pol
}

// pipInstall is a session's pip install into a target directory (the
// system Python is externally managed), through the shim and the mirror.
func pipInstall(args string) string {
	return `cd "$HOME" && pip install --disable-pip-version-check --no-input --retries 0 --target "$HOME/t" ` + args
}

// packagesView runs `sandtrail packages --session id --format json`.
func (e *env) packagesView(id string) *pkgview.View {
	e.t.Helper()
	out, err := e.cmd("packages", "--session", id, "--format", "json").Output()
	if err != nil {
		e.t.Fatalf("sandtrail packages: %v", err)
	}
	var v pkgview.View
	if err := json.Unmarshal(out, &v); err != nil {
		e.t.Fatalf("sandtrail packages --format json: %v\n%s", err, out)
	}
	return &v
}

// project is a session script that makes $HOME/p with package.json (and
// package-lock.json when lock is not empty), then runs cmd in it; cmd's
// output is printed only when it fails, its exit code after EXIT, and the
// entries of node_modules after NODE_MODULES.
func project(pkgJSON, lock, cmd string) string {
	s := `mkdir -p "$HOME/p" && cd "$HOME/p" && printf '%s' '` + pkgJSON + `' >package.json`
	if lock != "" {
		s += ` && printf '%s' '` + lock + `' >package-lock.json`
	}
	return s + "\n{ " + cmd + `; } >npm.out 2>&1; code=$?; [ $code = 0 ] || cat npm.out; echo EXIT $code; ls node_modules 2>/dev/null | sed 's/^/NODE_MODULES /'`
}
