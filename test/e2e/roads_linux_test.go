package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
)

// The roads around the verifying mirror. Each test takes one road an agent
// has to an npm package the mirror did not verify, in a real session
// through the real npm and the shim, and asserts the one thing the design
// promises of every road: the package is refused before any byte of it
// arrives (the unapproved server counted no request for its tarball), or
// the record holds an unverified_install alert naming it. The unapproved
// server is a fixture registry on loopback that no policy approves.

// roadPkgs are the packages of the unapproved server: fx-evil, and an
// fx-dep of a version the approved registry does not have.
func roadPkgs() []npmtest.Package {
	return []npmtest.Package{
		{Name: "fx-evil", Versions: []npmtest.Version{{Version: "1.0.0"}}},
		{Name: "fx-dep", Versions: []npmtest.Version{{Version: "6.6.6"}}},
	}
}

// roadEnv is an env whose mirror's npm upstream is an approved fixture
// registry (fx-app 1.0.0, which needs fx-dep ^1, fx-dep 1.0.0, and extra),
// with its policy, and the unapproved server.
func roadEnv(t *testing.T, extra ...npmtest.Package) (e *env, pol string, evil *npmtest.Registry) {
	good := npmtest.Start(t, append([]npmtest.Package{
		{Name: "fx-app", Versions: []npmtest.Version{{Version: "1.0.0", Deps: map[string]string{"fx-dep": "^1"}}}},
		{Name: "fx-dep", Versions: []npmtest.Version{{Version: "1.0.0"}}},
	}, extra...)...)
	e, pol = fixtureEnv(t, good)
	return e, pol, npmtest.Start(t, roadPkgs()...)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// roadOutcome says how a road ended for package name@version of the
// unapproved server: "refused" (not one request for its tarball reached
// the server) or "unverified_install" (an alert of that rule naming it is
// in the journal, raised live by the daemon's rules); "" is neither: the
// road is open.
func roadOutcome(t *testing.T, e *env, id string, evil *npmtest.Registry, name, version string) string {
	t.Helper()
	if evil != nil && evil.Count(npmtest.TarballPath(name, version)) == 0 {
		return "refused"
	}
	if unverifiedAlert(e.events(id), name) != nil {
		return pkgview.RuleUnverified
	}
	return ""
}

// unverifiedAlert is the journal's first unverified_install alert naming
// npm package name: the shim's claim ("npm NAME@VERSION was installed")
// or the kernel's ("npm NAME was installed").
func unverifiedAlert(evs []*event.Event, name string) *event.Event {
	for _, a := range kinds(evs, event.KindAlert) {
		s := a.Alert.Summary
		if a.Alert.RuleID == pkgview.RuleUnverified &&
			(strings.Contains(s, " npm "+name+"@") || strings.Contains(s, " npm "+name+" was installed")) {
			return a
		}
	}
	return nil
}

// wantRoadClosed fails the test when the road stayed open, and says how it
// was closed.
func wantRoadClosed(t *testing.T, e *env, r result, evil *npmtest.Registry, name, version string) string {
	t.Helper()
	got := roadOutcome(t, e, r.summary.SessionID, evil, name, version)
	if got == "" {
		t.Errorf("%s@%s: the server served its tarball %d times and the record has no unverified_install naming it\nstdout:\n%s\nalerts:\n%s",
			name, version, evil.Count(npmtest.TarballPath(name, version)), r.stdout, alertLines(e.events(r.summary.SessionID)))
	} else {
		t.Logf("%s@%s: %s", name, version, got)
	}
	return got
}

func alertLines(evs []*event.Event) string {
	var b strings.Builder
	for _, a := range kinds(evs, event.KindAlert) {
		fmt.Fprintf(&b, "  %s: %s\n", a.Alert.RuleID, a.Alert.Summary)
	}
	return b.String()
}

// TestRoadLockfileURL: a package-lock.json whose resolved names the
// unapproved server, then `npm ci`. Before the shim checked the lockfile's
// sources, it checked package.json's names alone, npm fetched the tarball
// from the server, and only the claim rule raised it afterwards; now the
// shim refuses before npm runs.
func TestRoadLockfileURL(t *testing.T) {
	t.Parallel()
	e, pol, evil := roadEnv(t)
	tgz := npmtest.Tarball("fx-evil", npmtest.Version{Version: "1.0.0"})
	pj := mustJSON(t, map[string]any{"name": "p", "version": "1.0.0", "dependencies": map[string]string{"fx-evil": "1.0.0"}})
	lock := mustJSON(t, map[string]any{"name": "p", "version": "1.0.0", "lockfileVersion": 3, "requires": true,
		"packages": map[string]any{
			"":                     map[string]any{"name": "p", "version": "1.0.0", "dependencies": map[string]string{"fx-evil": "1.0.0"}},
			"node_modules/fx-evil": map[string]any{"version": "1.0.0", "resolved": evil.URL + npmtest.TarballPath("fx-evil", "1.0.0"), "integrity": npmtest.Integrity(tgz)},
		}})
	r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", project(pj, lock, "npm ci "+npmFlags))
	if got := wantRoadClosed(t, e, r, evil, "fx-evil", "1.0.0"); got != "refused" || !strings.Contains(r.stdout, "EXIT 77") {
		t.Errorf("npm ci of a lockfile naming an unapproved server: %s, want refused by the shim (exit 77)\n%s", got, r.stdout)
	}
}

// TestRoadOverrides: package.json's overrides point a dependency of an
// approved package (fx-app's fx-dep) at a tarball URL on the unapproved
// server.
func TestRoadOverrides(t *testing.T) {
	t.Parallel()
	e, pol, evil := roadEnv(t)
	pj := mustJSON(t, map[string]any{"name": "p", "version": "1.0.0",
		"dependencies": map[string]string{"fx-app": "1.0.0"},
		"overrides":    map[string]string{"fx-dep": evil.URL + npmtest.TarballPath("fx-dep", "6.6.6")}})
	r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", project(pj, "", "npm install "+npmFlags))
	wantRoadClosed(t, e, r, evil, "fx-dep", "6.6.6")
	noUnverified(t, e.events(r.summary.SessionID), "fx-app")
}

// noUnverified fails the test when an unverified_install alert names one
// of names, packages that came through the mirror, verified.
func noUnverified(t *testing.T, evs []*event.Event, names ...string) {
	t.Helper()
	for _, n := range names {
		if a := unverifiedAlert(evs, n); a != nil {
			t.Errorf("%s came through the mirror, verified, and an alert says otherwise: %s", n, a.Alert.Summary)
		}
	}
}

// TestRoadRegistryEnvAnyCase: the registry given by the environment in any
// letter case, set after the session's own npm_config_registry (the
// mirror), as an agent's `export` does; npm reads every npm_config_*
// variable case-insensitively, the last one winning. Before the shim read
// them as npm does, it saw only the session's lower-case one (the mirror)
// and let the install run: the claim rule then raised it after the bytes
// had arrived. Now the shim refuses each before npm runs.
func TestRoadRegistryEnvAnyCase(t *testing.T) {
	t.Parallel()
	e, pol, evil := roadEnv(t)
	for _, v := range []string{"npm_config_registry", "NPM_CONFIG_REGISTRY", "Npm_Config_Registry"} {
		t.Run(v, func(t *testing.T) {
			// env(1) appends a variable it adds, after the session's.
			cmd := "env " + v + "=" + evil.URL + "/ npm install " + npmFlags + " fx-evil@1.0.0"
			pj := `{"name":"p","version":"1.0.0"}`
			r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", project(pj, "", cmd))
			if got := wantRoadClosed(t, e, r, evil, "fx-evil", "1.0.0"); got != "refused" {
				t.Errorf("%s=<unapproved>: %s, want refused by the shim before npm ran", v, got)
			}
		})
	}
}

// TestRoadShimVariables: the shim's own variables, set by the agent to
// weaken it. SANDTRAIL_MIRROR naming the unapproved server makes the shim
// take that server for the mirror and not report it as the registry (the
// claim rule raises it, since no verified fetch accounts for the claim).
// SANDTRAIL_SOCKET naming the agent's own socket, which allows every check
// and swallows every claim, leaves the daemon nothing from the shim at
// all: before the kernel's read-back, that road was open.
// (SANDTRAIL_SESSION_ID dropped with SANDTRAIL_SOCKET pointed nowhere is
// TestShimBlocks'.)
func TestRoadShimVariables(t *testing.T) {
	t.Parallel()
	e, pol, evil := roadEnv(t)
	pj := `{"name":"p","version":"1.0.0"}`
	t.Run("SANDTRAIL_MIRROR", func(t *testing.T) {
		cmd := "env SANDTRAIL_MIRROR=" + evil.URL + " npm_config_registry=" + evil.URL + "/ npm install " + npmFlags + " fx-evil@1.0.0"
		r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", project(pj, "", cmd))
		wantRoadClosed(t, e, r, evil, "fx-evil", "1.0.0")
	})
	t.Run("SANDTRAIL_SOCKET", func(t *testing.T) {
		cmd := "env SANDTRAIL_SOCKET=$HOME/yes.sock npm install " + npmFlags + " --registry=" + evil.URL + "/ fx-evil@1.0.0"
		r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", yesSocket+project(pj, "", cmd)+"\nkill $yes; echo ANSWERED $(cat $HOME/yes.count)")
		if !strings.Contains(r.stdout, "EXIT 0") || !strings.Contains(r.stdout, "ANSWERED x") {
			t.Fatalf("npm through a shim pointed at the agent's socket: want the install to run, its check answered by that socket\n%s", r.stdout)
		}
		if got := wantRoadClosed(t, e, r, evil, "fx-evil", "1.0.0"); got != pkgview.RuleUnverified {
			t.Errorf("got %s, want the kernel's unverified_install", got)
		}
	})
}

// yesSocket is a session script's background job, the agent's own: an
// ingest socket at $HOME/yes.sock that answers as a daemon that allows
// every check and journals every event would (the framing of
// record/ingest: a 4-byte big-endian length, then JSON), and writes an x
// to $HOME/yes.count per answer; $yes is its pid.
const yesSocket = `node -e '
const net = require("net"), fs = require("fs");
const home = process.env.HOME;
net.createServer((c) => {
	let buf = Buffer.alloc(0);
	c.on("data", (d) => {
		buf = Buffer.concat([buf, d]);
		while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
			const n = buf.readUInt32BE(0);
			const req = JSON.parse(buf.subarray(4, 4 + n));
			buf = buf.subarray(4 + n);
			const rep = { v: 1 };
			if (req.checks) rep.verdicts = req.checks.map(() => ({ verdict: "allow" }));
			if (req.events) rep.results = req.events.map(() => ({ status: "ok" }));
			const out = Buffer.from(JSON.stringify(rep)), h = Buffer.alloc(4);
			h.writeUInt32BE(out.length);
			c.write(Buffer.concat([h, out]));
			fs.appendFileSync(home + "/yes.count", "x");
		}
	});
}).listen(home + "/yes.sock");
' &
yes=$!
while [ ! -S "$HOME/yes.sock" ]; do sleep 0.05; done
`

// TestRoadScriptRunsNpm: an approved package's postinstall runs npm
// itself, naming the unapproved server. Through the shim (npm, first on
// the script's PATH) it is refused. Through npm's own entry point
// ($npm_execpath, which npm sets for every script), no shim checks it,
// the outer shim's read-back reads only the project's tree, and the
// package lands in the script's package's own node_modules: before the
// kernel's read-back, that road was open.
func TestRoadScriptRunsNpm(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, npm, want string }{
		{"npm on PATH", "npm", "refused"},
		{"npm_execpath", `node "$npm_execpath"`, pkgview.RuleUnverified},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			evil := npmtest.Start(t, roadPkgs()...)
			script := tt.npm + " install --no-audit --no-fund --no-save --registry=" + evil.URL + "/ fx-evil@1.0.0"
			e, pol, _ := roadEnvWith(t, npmtest.Package{Name: "fx-hook",
				Versions: []npmtest.Version{{Version: "1.0.0", Scripts: map[string]string{"postinstall": script}}}})
			pj := `{"name":"p","version":"1.0.0"}`
			r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", project(pj, "", "npm install "+npmFlags+" fx-hook@1.0.0"))
			if got := wantRoadClosed(t, e, r, evil, "fx-evil", "1.0.0"); got != "" && got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			noUnverified(t, e.events(r.summary.SessionID), "fx-hook")
		})
	}
}

// roadEnvWith is roadEnv without its unapproved server.
func roadEnvWith(t *testing.T, extra ...npmtest.Package) (*env, string, *npmtest.Registry) {
	good := npmtest.Start(t, append([]npmtest.Package{
		{Name: "fx-dep", Versions: []npmtest.Version{{Version: "1.0.0"}}},
	}, extra...)...)
	e, pol := fixtureEnv(t, good)
	return e, pol, good
}

// killShim is a session script's background job, the agent's own: it
// waits for a shim of the session (an executable named sandtrail-shim, in
// this session's cgroup) with a child (its check is done and its manager
// runs), kills the shim with SIGKILL, prints KILLED and waits for the
// child to end.
const killShim = `node -e '
const fs = require("fs");
const cg = fs.readFileSync("/proc/self/cgroup", "utf8");
const read = (p) => { try { return fs.readFileSync(p, "utf8"); } catch { return ""; } };
const mine = () => fs.readdirSync("/proc").filter((d) => /^[0-9]+$/.test(d) && read("/proc/" + d + "/cgroup") === cg);
const ppid = (d) => (read("/proc/" + d + "/status").match(/^PPid:\s*(\d+)/m) || [])[1];
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
for (let i = 0; i < 1500; i++) {
	const procs = mine();
	for (const d of procs) {
		let exe = "";
		try { exe = fs.readlinkSync("/proc/" + d + "/exe"); } catch {}
		if (!exe.endsWith("/sandtrail-shim")) continue;
		const kids = procs.filter((k) => ppid(k) === d);
		if (kids.length === 0) continue;
		process.kill(Number(d), "SIGKILL");
		console.log("KILLED");
		while (kids.some((k) => fs.existsSync("/proc/" + k))) sleep(100);
		process.exit(0);
	}
	sleep(10);
}
console.log("NO SHIM TO KILL");
' &
killer=$!
`

// TestRoadShimKilled: the shim is killed (SIGKILL, by the agent's own
// background job) after its check, while npm goes on. The policy approves
// the fixture registry itself, so the shim lets `npm install --registry`
// straight to it run, around the mirror (as in TestUnverifiedInstall);
// with the shim dead nobody reads back what npm installed. Before the
// kernel's read-back, that road was open. The same kill during an install
// through the mirror raises nothing: the kernel's account joins the
// mirror's verified fetches.
func TestRoadShimKilled(t *testing.T) {
	t.Parallel()
	pkgs := []npmtest.Package{
		{Name: "fx-slow", Versions: []npmtest.Version{{Version: "1.0.0", Deps: map[string]string{"fx-leaf": "^1"},
			Scripts: map[string]string{"postinstall": "sleep 2"}}}},
		{Name: "fx-leaf", Versions: []npmtest.Version{{Version: "1.0.0"}}},
	}
	direct := npmtest.Start(t, pkgs...)
	e, _, good := roadEnvWith(t, pkgs...)
	// The mirror's own upstream stays approved (it refuses to start
	// otherwise); the registry npm is sent to around it is approved too.
	pol := writePolicy(t, "sources:\n  registries:\n    npm: ["+direct.URL+"/, "+good.URL+"/, https://registry.npmjs.org/]\n")
	pj := `{"name":"p","version":"1.0.0"}`
	t.Run("around the mirror", func(t *testing.T) {
		r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c",
			killShim+project(pj, "", "npm install "+npmFlags+" --registry="+direct.URL+"/ fx-slow@1.0.0; c=$?; wait $killer; (exit $c)"))
		evs := e.events(r.summary.SessionID)
		if !strings.Contains(r.stdout, "KILLED") || !strings.Contains(r.stdout, "NODE_MODULES fx-slow") {
			t.Fatalf("want the shim killed and npm to finish the install\n%s\n%s", r.stdout, procLines(evs))
		}
		if n := len(kinds(evs, event.KindPkgInstall)); n != 0 {
			t.Fatalf("%d pkg.install events: the shim was not killed before its read-back", n)
		}
		for _, name := range []string{"fx-slow", "fx-leaf"} {
			if got := wantRoadClosed(t, e, r, direct, name, "1.0.0"); got != pkgview.RuleUnverified {
				t.Errorf("%s: got %q, want the kernel's unverified_install", name, got)
			}
		}
	})
	t.Run("through the mirror", func(t *testing.T) {
		e, mpol, _ := roadEnvWith(t, pkgs...)
		r := e.run("--user", "nobody", "--policy", mpol, "--", "sh", "-c",
			killShim+project(pj, "", "npm install "+npmFlags+" fx-slow@1.0.0; c=$?; wait $killer; (exit $c)"))
		if !strings.Contains(r.stdout, "KILLED") || !strings.Contains(r.stdout, "NODE_MODULES fx-slow") {
			t.Fatalf("want the shim killed and npm to finish the install\n%s\n%s", r.stdout, r.stderr)
		}
		if a := alertLines(e.events(r.summary.SessionID)); strings.Contains(a, pkgview.RuleUnverified) {
			t.Errorf("an install through the mirror with its shim killed raised unverified_install:\n%s", a)
		}
	})
}

// TestRoadDirectApprovedRegistry: `npm install
// --registry=https://registry.npmjs.org/ is-odd`, an approved registry
// named directly, around the mirror. The shim allows it (the registry is
// approved) and claims what npm installed; the claim rule raises
// unverified_install, since no verified fetch of the mirror's accounts for
// it (closed before the kernel's read-back; the kernel's agrees, and is
// not repeated). Refusing the connection itself is the egress change that
// makes the approved registries reachable only through the mirror, which
// is not in this branch: with it, the install fails and nothing arrives.
func TestRoadDirectApprovedRegistry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pj := `{"name":"p","version":"1.0.0"}`
	r := e.run("--user", "nobody", "--timeout", "5m", "--", "sh", "-c",
		project(pj, "", "npm install "+npmFlags+" --registry=https://registry.npmjs.org/ is-odd@3.0.1"))
	installed := strings.Contains(r.stdout, "NODE_MODULES is-odd")
	a := unverifiedAlert(e.events(r.summary.SessionID), "is-odd")
	switch {
	case !installed && strings.Contains(r.stdout, "EXIT 0"):
		t.Fatalf("npm install succeeded and installed no is-odd\n%s", r.stdout)
	case !installed:
		t.Logf("refused: the install failed and nothing was installed")
	case a == nil:
		t.Errorf("is-odd installed from the registry directly, and no unverified_install names it\n%s", alertLines(e.events(r.summary.SessionID)))
	default:
		t.Logf("unverified_install: %s", a.Alert.Summary)
	}
}

// procLines lists a session's process events and alerts, for a failure's
// message.
func procLines(evs []*event.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		switch {
		case ev.Kind == event.KindExec || ev.Kind == event.KindExit || ev.Kind == event.KindFork:
			fmt.Fprintf(&b, "  %d %s pid %d ppid %d %s %q\n", ev.Seq, ev.Kind, ev.Proc.Pid, ev.Proc.PPid, ev.Proc.Exe, ev.Proc.Argv)
		case ev.Kind == event.KindAlert:
			fmt.Fprintf(&b, "  %d alert %s: %s\n", ev.Seq, ev.Alert.RuleID, ev.Alert.Summary)
		case ev.File != nil && strings.HasSuffix(ev.File.Path, "/package.json"):
			fmt.Fprintf(&b, "  %d %s pid %d %s\n", ev.Seq, ev.Kind, ev.Proc.Pid, ev.File.Path)
		}
	}
	return b.String()
}
