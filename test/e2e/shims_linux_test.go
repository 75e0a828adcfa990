package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/pypi/pypitest"
)

// buildShims builds sandtrail-shim into dir (or copies SANDTRAIL_E2E_SHIM)
// and links it in shims as every manager it stands in for, as install.sh
// does in /usr/local/lib/sandtrail/shims.
func buildShims(dir, shims string) error {
	shim := filepath.Join(dir, "sandtrail-shim")
	if prebuilt := os.Getenv("SANDTRAIL_E2E_SHIM"); prebuilt != "" {
		if err := copyFile(prebuilt, shim, 0o755); err != nil {
			return err
		}
	} else if out, err := exec.Command("go", "build", "-o", shim, "github.com/sandtrail/sandtrail/cmd/sandtrail-shim").CombinedOutput(); err != nil {
		return fmt.Errorf("building sandtrail-shim: %v\n%s", err, out)
	}
	if err := os.MkdirAll(shims, 0o755); err != nil {
		return err
	}
	names, err := exec.Command(shim, "list").Output()
	if err != nil {
		return fmt.Errorf("sandtrail-shim list: %w", err)
	}
	for _, name := range strings.Fields(string(names)) {
		if err := os.Symlink(shim, filepath.Join(shims, name)); err != nil {
			return err
		}
	}
	return nil
}

// installs are the session's pkg.install events by name@version.
func installs(evs []*event.Event) map[string]*event.Event {
	out := map[string]*event.Event{}
	for _, e := range kinds(evs, event.KindPkgInstall) {
		out[e.Pkg.Name+"@"+e.Pkg.Resolved] = e
	}
	return out
}

// TestShimNpmRegistry is issue 13's npm case against the real registry:
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
		!strings.HasPrefix(p.Hash, "sha512-") || !strings.Contains(p.SourceURL, "/npm/left-pad/-/left-pad-1.3.0.tgz") ||
		p.ManagerPid == 0 || p.Purl != "pkg:npm/left-pad@1.3.0" {
		t.Errorf("left-pad's pkg.install = %+v, want requested ^1.3.0, direct, sha512, the mirror's URL and npm's pid", *p)
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
// pkg.blocked event in the session.
func TestShimBlocks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
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
