package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
	"github.com/sandtrail/sandtrail/test/testnet"
)

// TestShimNpmRegistry: the npm shim against the real registry:
// `npm install left-pad@^1.3.0 express@4` in a session runs through the
// shim and the mirror. Each package has a pkg.install with what was asked
// for, what was resolved, the URL and sha512, the real npm's pid and the
// agent's uid, in the session; each transitive one names the package that
// required it; and each joins a verified pkg.fetch of the same hash.
func TestShimNpmRegistry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("--user", "nobody", "--timeout", "5m", "--", "sh", "-c", npmInstall("left-pad@^1.3.0 express@4"))
	if r.code != 0 {
		t.Fatalf("npm install through the shim: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	pkgs := lockPackages(t, r.stdout)
	evs := e.events(r.summary.SessionID)
	got, served := installs(evs), fetches(evs)
	if len(got) != len(pkgs) {
		t.Errorf("%d pkg.install events for the lockfile's %d packages", len(got), len(pkgs))
	}
	lp := got["left-pad@1.3.0"]
	if lp == nil {
		t.Fatalf("no pkg.install of left-pad@1.3.0; have %d installs", len(got))
	}
	nobody := uint32(65534)
	if p := lp.Pkg; p.Manager != "npm" || p.Requested != "^1.3.0" || p.Direct == nil || !*p.Direct ||
		!strings.HasPrefix(p.Hash, "sha512-") || p.SourceURL != "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz" ||
		p.ManagerPid == 0 || p.Purl != "pkg:npm/left-pad@1.3.0" {
		t.Errorf("left-pad's pkg.install = %+v, want requested ^1.3.0, direct, sha512, the registry's URL (as npm's lockfile names it) and npm's pid", *p)
	}
	if lp.Source != event.SourceShim || lp.SessionID != r.summary.SessionID || lp.Proc == nil || lp.Proc.UID == nil || *lp.Proc.UID != nobody {
		t.Errorf("left-pad's pkg.install: source %s, session %s, proc %+v; want the shim's, in the session, as nobody", lp.Source, lp.SessionID, lp.Proc)
	}
	for path, p := range pkgs {
		name := strings.TrimPrefix(path[strings.LastIndex(path, "node_modules/"):], "node_modules/")
		in := got[name+"@"+p.Version]
		if in == nil {
			t.Errorf("%s@%s: no pkg.install", name, p.Version)
			continue
		}
		if in.Pkg.Hash != p.Integrity || in.Pkg.SourceURL != p.Resolved {
			t.Errorf("%s: pkg.install hash %s from %s, lockfile %s from %s", name, in.Pkg.Hash, in.Pkg.SourceURL, p.Integrity, p.Resolved)
		}
		direct := name == "left-pad" || name == "express"
		if in.Pkg.Direct == nil || *in.Pkg.Direct != direct || (!direct && in.Pkg.RequestedBy == "") || (!direct && in.Pkg.Requested != "") {
			t.Errorf("%s: direct %v, requested %q, requested_by %q; want direct %v, and a transitive one names who required it",
				name, in.Pkg.Direct, in.Pkg.Requested, in.Pkg.RequestedBy, direct)
		}
		f := served[name+"@"+p.Version]
		if len(f) == 0 || f[0].Outcome != "served" || f[0].Verified == nil || !*f[0].Verified || f[0].Hash != in.Pkg.Hash {
			t.Errorf("%s@%s: pkg.install does not join a verified pkg.fetch of its hash: %v", name, p.Version, f)
		}
	}
	e.verify()
}

// TestShimBlocks: installs from unapproved sources are stopped before the
// manager runs, with a message naming the rule, exit code 77 and a
// pkg.blocked event in the session. An agent that points its shim away
// from the daemon and drops the session's variables is refused too: the
// shim knows the session by its cgroup.
func TestShimBlocks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("--user", "nobody", "--", "sh", "-c",
		`cd "$HOME" && env -u SANDTRAIL_SESSION_ID SANDTRAIL_SOCKET=/nonexistent npm install --no-audit --no-fund left-pad@1.3.0`)
	if r.code != 77 || !strings.Contains(r.stderr, "cannot be checked") {
		t.Errorf("an install whose check the agent made impossible: exit %d, want 77, refused as unchecked\n%s", r.code, r.stderr)
	}
	for _, tt := range []struct{ name, cmd, source string }{
		{"npm git", "npm install git+https://example.invalid/x.git", "git+https://example.invalid/x.git"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.run("--user", "nobody", "--", "sh", "-c", `cd "$HOME" && `+tt.cmd)
			if r.code != 77 || !strings.Contains(r.stderr, "refused") || !strings.Contains(r.stderr, "on_unknown_source") {
				t.Fatalf("%s: exit %d, want 77 with a message naming the rule\n%s", tt.cmd, r.code, r.stderr)
			}
			var blocked []*event.Pkg
			for _, ev := range kinds(e.events(r.summary.SessionID), event.KindPkgBlocked) {
				blocked = append(blocked, ev.Pkg)
			}
			if len(blocked) != 1 || blocked[0].SourceURL != tt.source || blocked[0].Rule != "on_unknown_source" {
				t.Errorf("%s: pkg.blocked %+v, want one for %s by on_unknown_source", tt.cmd, blocked, tt.source)
			}
			// The shim ran; the real manager never did.
			shimRan := false
			for _, ev := range kinds(e.events(r.summary.SessionID), event.KindExec) {
				switch exe := ev.Proc.Exe; {
				case strings.HasPrefix(exe, shimDir+"/"):
					shimRan = true
				case strings.HasSuffix(exe, "/node"), strings.HasSuffix(exe, "/python3"), strings.HasSuffix(exe, "/cargo"):
					t.Errorf("%s: the real manager ran: %s %q", tt.cmd, exe, ev.Proc.Argv)
				}
			}
			if !shimRan {
				t.Errorf("%s: no exec of the shim recorded", tt.cmd)
			}
		})
	}
}

// TestShimPip: `pip install 'fixture-pkg>=1.0,<2'` from the fixture index
// records the requested spec, what was resolved and its sha256, and the
// dependency it pulled in, each joined with the mirror's verified fetch;
// a direct URL is refused before pip runs.
func TestShimPip(t *testing.T) {
	t.Parallel()
	e, _, pol := pipEnv(t)
	r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", pipInstall(`'fixture-pkg>=1.0,<2'`))
	if r.code != 0 {
		t.Fatalf("pip install through the shim: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	evs := e.events(r.summary.SessionID)
	got, served := installs(evs), fetches(evs)
	want := map[string]struct{ requested, by string }{"fixture-pkg@1.5": {">=1.0,<2", ""}, "fixture-dep@0.1": {"", "fixture-pkg"}}
	for id, w := range want {
		in := got[id]
		if in == nil {
			t.Errorf("no pkg.install of %s; have %v", id, got)
			continue
		}
		p := in.Pkg
		if p.Manager != "pip" || p.Requested != w.requested || !strings.HasPrefix(p.Hash, "sha256:") || len(p.Hash) != 71 ||
			p.RequestedBy != w.by || p.SourceURL == "" || p.ManagerPid == 0 {
			t.Errorf("%s: pkg.install %+v, want requested %q, requested_by %q, a sha256 and a URL", id, *p, w.requested, w.by)
		}
		if f := served[id]; len(f) == 0 || f[0].Verified == nil || !*f[0].Verified || f[0].Hash != p.Hash {
			t.Errorf("%s: no verified pkg.fetch of the same hash: %v", id, f)
		}
	}

	r = e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", pipInstall("https://example.invalid/x.whl"))
	if r.code != 77 || !strings.Contains(r.stderr, "on_unknown_source") {
		t.Errorf("pip install of a direct URL: exit %d, want 77 naming the rule\n%s", r.code, r.stderr)
	}
	if b := kinds(e.events(r.summary.SessionID), event.KindPkgBlocked); len(b) != 1 || b[0].Pkg.SourceURL != "https://example.invalid/x.whl" {
		t.Errorf("pkg.blocked = %v, want one for the URL", b)
	}

	// A bypass: python3 -m pip, no shim above it. The mirror still serves
	// (PIP_INDEX_URL), so the package is in the view, mirror_only.
	r = e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c",
		`cd "$HOME" && python3 -m pip install --disable-pip-version-check --no-input --retries 0 --target "$HOME/t2" fixture-dep`)
	if r.code != 0 {
		t.Fatalf("python3 -m pip install: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	v := e.packagesView(r.summary.SessionID)
	bypass := 0
	for _, a := range v.Alerts {
		if a.Alert != nil && a.Alert.RuleID == pkgview.RuleBypass {
			bypass++
		}
	}
	seen := ""
	for _, p := range v.Packages {
		if p.Name == "fixture-dep" {
			seen = p.Seen
		}
	}
	if bypass != 1 || seen != pkgview.SeenMirrorOnly {
		t.Errorf("python3 -m pip: %d shim_bypass alerts, fixture-dep seen %q; want 1 and %s", bypass, seen, pkgview.SeenMirrorOnly)
	}
}

// TestShimAptInstall: the unprivileged agent's `apt-get update` and
// `apt-get install -y hello` run through the daemon's broker, from the real
// Debian archive through the mirror: hello is installed, and its pkg.install
// in the session has the .deb's sha256 and URL.
func TestShimAptInstall(t *testing.T) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("apt-get is not installed")
	}
	if exec.Command("dpkg", "-s", "hello").Run() == nil {
		t.Skip("hello is installed already; the test installs and removes it")
	}
	e := newEnv(t)
	t.Cleanup(func() {
		if out, err := exec.Command("apt-get", "purge", "-y", "-qq", "hello").CombinedOutput(); err != nil {
			t.Logf("removing hello: %v\n%s", err, out)
		}
	})
	r := e.run("--user", "nobody", "--timeout", "5m", "--", "sh", "-c", "apt-get update -qq && apt-get install -y hello && hello")
	if r.code != 0 || !strings.Contains(r.stdout, "Hello, world!") {
		t.Fatalf("apt-get install -y hello as the agent: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	got := installs(e.events(r.summary.SessionID))
	var hello *event.Pkg
	for _, in := range got {
		if in.Pkg.Name == "hello" {
			hello = in.Pkg
		}
	}
	if hello == nil || hello.Manager != "apt" || !strings.HasPrefix(hello.Hash, "sha256:") || len(hello.Hash) != 71 ||
		!strings.Contains(hello.SourceURL, "/pool/main/h/hello/hello_") || hello.Direct == nil || !*hello.Direct {
		t.Fatalf("hello's pkg.install = %+v, want the .deb's sha256 and URL, direct", hello)
	}
	e.verify()
}

// TestShimPackagesView: a fixture package's postinstall reads ~/.npmrc and
// connects to a loopback port; `sandtrail packages` shows, under that
// package, the postinstall's process, the read and the connection. Then
// npm run by its absolute path (a bypass) raises shim_bypass, and its
// packages are still in the view, from the mirror's records.
func TestShimPackagesView(t *testing.T) {
	t.Parallel()
	ln := testnet.StartDropServer(t, "tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf(`node -e "require('fs').readFileSync(require('os').homedir()+'/.npmrc');`+
		`const s=require('net').connect(%d,'127.0.0.1');s.on('connect',()=>s.end());s.on('error',()=>{})"`, port)
	reg := npmtest.Start(t,
		npmtest.Package{Name: "fx-post", Versions: []npmtest.Version{{Version: "1.0.0", Scripts: map[string]string{"postinstall": script}}}},
		npmtest.Package{Name: "fx-plain", Versions: []npmtest.Version{{Version: "2.0.0"}}})
	e, _ := fixtureEnv(t, reg)
	pol := writePolicy(t, fmt.Sprintf("sources:\n  registries:\n    npm: [%s/]\nfiles:\n  sensitive_read: [~/.npmrc]\n", reg.URL))
	npmrc := `echo '//registry.example.invalid/:_authToken=secret' >"$HOME/.npmrc"; `
	r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", npmrc+npmInstall("fx-post@1.0.0"))
	if r.code != 0 {
		t.Fatalf("npm install fx-post: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	v := e.packagesView(r.summary.SessionID)
	var post *pkgview.Package
	for _, p := range v.Packages {
		if p.Name == "fx-post" {
			post = p
		}
	}
	if post == nil {
		t.Fatalf("no fx-post row in the packages view: %+v", v.Packages)
	}
	if post.Seen != pkgview.SeenBoth || len(post.Processes) == 0 {
		t.Errorf("fx-post: seen %s, %d script processes; want shim+mirror with its postinstall's processes", post.Seen, len(post.Processes))
	}
	read, connected := false, false
	for _, f := range post.Files {
		read = read || (strings.HasSuffix(f.Path, "/.npmrc") && f.Sensitive)
	}
	for _, c := range post.Connections {
		connected = connected || (c.DstPort == uint16(port) && c.DstIP == "127.0.0.1")
	}
	if !read || !connected {
		t.Errorf("fx-post's postinstall: read ~/.npmrc %v, connected to port %d %v; files %+v, connections %+v",
			read, port, connected, post.Files, post.Connections)
		for _, ev := range e.events(r.summary.SessionID) {
			if ev.File != nil || ev.Kind == event.KindExec {
				t.Logf("%s pid %d ppid %d %+v %q cwd %s", ev.Kind, ev.Proc.Pid, ev.Proc.PPid, ev.File, ev.Proc.Argv, ev.Proc.Cwd)
			}
		}
	}

	// A bypass: the real npm by its absolute path, no shim above it.
	r = e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c",
		`mkdir -p "$HOME/b" && cd "$HOME/b" && /usr/bin/npm install --no-audit --no-fund fx-plain@2.0.0 >npm.out 2>&1 || { cat npm.out; exit 3; }`)
	if r.code != 0 {
		t.Fatalf("/usr/bin/npm install: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	v = e.packagesView(r.summary.SessionID)
	bypass := 0
	for _, a := range v.Alerts {
		if a.Alert != nil && a.Alert.RuleID == pkgview.RuleBypass {
			bypass++
		}
	}
	if bypass != 1 {
		t.Errorf("%d shim_bypass alerts, want 1: %+v", bypass, v.Alerts)
	}
	seen := ""
	for _, p := range v.Packages {
		if p.Name == "fx-plain" {
			seen = p.Seen
		}
	}
	if seen != pkgview.SeenMirrorOnly {
		t.Errorf("fx-plain after the bypass: seen %q, want %s", seen, pkgview.SeenMirrorOnly)
	}
	// The live rule raised it in the journal too.
	if a := kinds(e.events(r.summary.SessionID), event.KindAlert); len(a) == 0 {
		t.Errorf("no alert event in the session's record")
	}
}

// paritySession is a session's script that runs each case once through
// the shim (its name, first on PATH) and once straight (the real binary's
// path), in the same directory made fresh each time, and keeps stdout,
// stderr and the exit code of each run in $HOME/parity/<case>.<shim|direct>.
const paritySession = `set -u
cd "$HOME"; mkdir -p parity
run() { # NAME WHICH CMD...
	name=$1 which=$2; shift 2
	rm -rf w && mkdir w && cd w
	mkdir -p local && echo '{"name":"local","version":"1.0.0"}' >local/package.json
	echo '{"name":"p","version":"1.0.0"}' >package.json
	"$@" >"../parity/$name.$which.out" 2>"../parity/$name.$which.err"
	echo $? >"../parity/$name.$which.code"
	cd ..
}
npmf="--no-audit --no-fund --no-update-notifier --logs-max=0"
for which in shim direct; do
	npm=npm pip=pip
	[ $which = direct ] && npm=/usr/bin/npm pip=/usr/bin/pip
	run npm-version $which $npm --version
	run npm-install-fails $which $npm install ./missing $npmf
	run npm-install-succeeds $which $npm install ./local $npmf
	run pip-version $which $pip --version
	run pip-install-fails $which $pip install --no-index --disable-pip-version-check nonexistent-xyz
done
`

// TestShimParitySession: in a real session, as the agent, stdout, stderr
// and the exit code of npm and pip through the shim equal a direct run's,
// for calls without install intent and for installs that succeed and fail
// (npm's "in 339ms" aside). TestOutputParity covers cargo and apt-get, and
// more cases, outside a session.
func TestShimParitySession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Local packages are direct sources: this policy allows them, so that
	// the installs run through the shim as they run directly.
	pol := writePolicy(t, "sources:\n  registries:\n    npm: [https://registry.npmjs.org/]\n    pypi: [https://pypi.org/simple/]\n  allow_direct_urls: true\n")
	r := e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", paritySession)
	if r.code != 0 {
		t.Fatalf("parity session: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	sum := r.summary
	if sum.Workdir == "" {
		t.Fatalf("run's summary names no workdir\n%s", r.stderr)
	}
	took := regexp.MustCompile(`in [0-9.]+m?s\b`)
	for _, c := range []string{"npm-version", "npm-install-fails", "npm-install-succeeds", "pip-version", "pip-install-fails"} {
		for _, part := range []string{"out", "err", "code"} {
			read := func(which string) string {
				b, err := os.ReadFile(filepath.Join(sum.Workdir, "parity", c+"."+which+"."+part))
				if err != nil {
					t.Fatal(err)
				}
				return took.ReplaceAllString(string(b), "in TIME")
			}
			if got, want := read("shim"), read("direct"); got != want {
				t.Errorf("%s %s through the shim = %q, directly %q", c, part, got, want)
			}
		}
	}
	if code, _ := os.ReadFile(filepath.Join(sum.Workdir, "parity", "npm-install-succeeds.shim.code")); strings.TrimSpace(string(code)) != "0" {
		t.Errorf("npm install ./local through the shim exited %s, want a success to compare", code)
	}
}
