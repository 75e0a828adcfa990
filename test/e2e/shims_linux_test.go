package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
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
