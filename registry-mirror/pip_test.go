package mirror

import (
	"context"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch/fetchtest"
	"github.com/sandtrail/sandtrail/registry-mirror/pypi/pypitest"
)

// pythons finds the interpreters whose pip the test runs: Debian's
// (pip 23.0.1) and the one first on PATH, when it is another, each by
// its real path (a pyenv shim needs an environment the test does not
// pass on), and the versions of their pips.
func pythons(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		b, err := exec.Command(py, "-c", "import sys, pip; print(sys.executable, pip.__version__)").Output()
		if err != nil {
			continue
		}
		if exe, version, ok := strings.Cut(strings.TrimSpace(string(b)), " "); ok && !slices.Contains(slices.Collect(maps.Values(out)), exe) {
			out["pip-"+version] = exe
		}
	}
	if len(out) == 0 {
		t.Skip("no python3 with pip on this machine")
	}
	return out
}

// pip runs `python -m pip install ARGS` into a new target directory
// against the mirror's index, isolated from any pip configuration or
// PIP_* variable: only the mirror is ever asked. It returns the target,
// pip's output and its error.
func pip(t *testing.T, python, mirrorURL string, args ...string) (string, string, error) {
	t.Helper()
	target, home := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append([]string{"-m", "pip", "install", "--isolated", "--no-cache-dir", "--disable-pip-version-check", "--no-input",
		"--retries", "0", "--timeout", "30", "--only-binary", ":all:", "--target", target,
		"--index-url", mirrorURL + "/pypi/simple/"}, args...)
	cmd := exec.CommandContext(ctx, python, argv...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8", "PYTHONNOUSERSITE=1"}
	out, err := cmd.CombinedOutput()
	return target, string(out), err
}

// startPyPI runs a mirror whose PyPI upstream is ix, with a 48h cooldown.
func startPyPI(t *testing.T, ix *pypitest.Index) (*httptest.Server, *recorder) {
	t.Helper()
	eng := fetchtest.Policy(t, "sources:\n  registries:\n    pypi: ["+ix.SimpleURL()+", "+ix.Files.URL+
		"/packages/]\ncooldown:\n  min_age: 48h\n  action: block\n")
	rec := &recorder{}
	m, err := New(Config{CacheDir: t.TempDir(), Upstreams: map[string]string{"pypi": ix.SimpleURL()}, Policy: eng, Emit: rec.emit,
		Host: "h1", Log: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return srv, rec
}

// await returns the first event that ok accepts, waiting a little: the
// mirror records a file just after its last byte is sent.
func (r *recorder) await(t *testing.T, ok func(*event.Event) bool) *event.Event {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, e := range r.all() {
			if ok(e) {
				return e
			}
		}
	}
	return nil
}

func pipFixture() []pypitest.Project {
	old := time.Now().Add(-30 * 24 * time.Hour)
	return []pypitest.Project{
		{Name: "tiny-pkg", Versions: []pypitest.Version{{Version: "1.0", Uploaded: old}, {Version: "1.1", Uploaded: old, Deps: []string{"tiny-dep>=0.1"}},
			{Version: "2.0", Uploaded: time.Now().Add(-time.Hour)}}},
		{Name: "Tiny_Dep", Versions: []pypitest.Version{{Version: "0.1", Uploaded: old}}},
		{Name: "bad-pkg", Versions: []pypitest.Version{{Version: "1.0", Uploaded: old}}},
	}
}

// fixtureWheel is the wheel of pipFixture's name (in normal form) and
// version.
func fixtureWheel(name, version string) []byte {
	for _, p := range pipFixture() {
		for _, v := range p.Versions {
			if strings.ReplaceAll(strings.ToLower(p.Name), "_", "-") == name && v.Version == version {
				return pypitest.Wheel(p.Name, v)
			}
		}
	}
	return nil
}

func fetchOf(name, version string) func(*event.Event) bool {
	return func(e *event.Event) bool {
		return e.Kind == event.KindPkgFetch && e.Pkg.Name == name && e.Pkg.Resolved == version
	}
}

// TestPipInstall is the mirror's pip case: a real `pip install` through the
// mirror from a loopback fixture index installs the newest version that
// is outside the cooldown, and its dependency, each wheel verified by
// sha256 and recorded as a pkg.fetch; a pinned install of the version
// inside the cooldown fails and pkg.filter names the rule; a tampered
// wheel makes pip fail, and hash_mismatch is recorded.
func TestPipInstall(t *testing.T) {
	for name, py := range pythons(t) {
		t.Run(name, func(t *testing.T) {
			ix := pypitest.Start(t, pipFixture()...)
			ix.Tamper("bad-pkg", pypitest.WheelName("bad-pkg", "1.0"))
			srv, rec := startPyPI(t, ix)
			target, out, err := pip(t, py, srv.URL, "tiny-pkg")
			if err != nil {
				t.Fatalf("pip install tiny-pkg: %v\n%s", err, out)
			}
			t.Logf("pip install tiny-pkg:\n%s", out)
			checkInstalled(t, target, "tiny_pkg", "1.1")
			checkInstalled(t, target, "tiny_dep", "0.1")
			for _, nv := range [][2]string{{"tiny-pkg", "1.1"}, {"tiny-dep", "0.1"}} {
				e := rec.await(t, fetchOf(nv[0], nv[1]))
				if e == nil {
					t.Fatalf("no pkg.fetch for %s %s; events %v", nv[0], nv[1], rec.all())
				}
				if p := e.Pkg; p.Outcome != "served" || p.Hash != "sha256:"+pypitest.SHA256(fixtureWheel(nv[0], nv[1])) || p.Verified == nil || !*p.Verified || p.Purl != "pkg:pypi/"+nv[0]+"@"+nv[1] ||
					!strings.HasPrefix(p.SourceURL, ix.Files.URL+"/packages/") || p.Cache != "miss" || e.Validate() != nil {
					t.Errorf("pkg.fetch of %s = %+v (validate: %v)", nv[0], *p, e.Validate())
				}
			}
			checkPinnedCooldown(t, py, srv.URL, rec)
			checkTampered(t, py, srv.URL, rec)
		})
	}
}

func checkInstalled(t *testing.T, target, module, version string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(target, module, "__init__.py"))
	if err != nil || !strings.Contains(string(b), `"`+version+`"`) {
		t.Errorf("%s in the target = %q, %v, want version %s", module, b, err, version)
	}
	if _, err := os.Stat(filepath.Join(target, module+"-"+version+".dist-info", "RECORD")); err != nil {
		t.Errorf("%s %s has no dist-info: %v", module, version, err)
	}
}

// checkPinnedCooldown: `pip install tiny-pkg==2.0` fails, since 2.0 is
// inside the cooldown, and the pkg.filter names the rule; so does an
// install from the URL of 2.0's wheel on the mirror.
func checkPinnedCooldown(t *testing.T, py, mirrorURL string, rec *recorder) {
	t.Helper()
	_, out, err := pip(t, py, mirrorURL, "tiny-pkg==2.0")
	t.Logf("pip install tiny-pkg==2.0:\n%s", out)
	if err == nil || !strings.Contains(out, "No matching distribution") {
		t.Errorf("pip install tiny-pkg==2.0 = %v, want it to fail with no matching distribution\n%s", err, out)
	}
	e := rec.await(t, func(e *event.Event) bool { return e.Kind == event.KindPkgFilter && e.Pkg.Name == "tiny-pkg" })
	if e == nil || len(e.Pkg.Removed) != 1 || e.Pkg.Removed[0].Version != "2.0" || e.Pkg.Removed[0].Rule != "cooldown.min_age" ||
		e.Pkg.Removed[0].Outcome != "cooldown" {
		t.Errorf("pkg.filter = %+v, want 2.0 removed by cooldown.min_age", e)
	}
	// The file's own URL, which the page no longer gives, is refused too.
	wheel := mirrorURL + "/pypi/files/tiny-pkg/" + pypitest.WheelName("tiny-pkg", "2.0")
	if _, out, err := pip(t, py, mirrorURL, wheel); err == nil || !strings.Contains(out, "403") {
		t.Errorf("pip install %s = %v, want a 403\n%s", wheel, err, out)
	}
	e = rec.await(t, fetchOf("tiny-pkg", "2.0"))
	if e == nil || e.Pkg.Outcome != "cooldown" || e.Pkg.Rule != "cooldown.min_age" {
		t.Errorf("pkg.fetch of 2.0's wheel = %+v, want refused by cooldown.min_age", e)
	}
}

// checkTampered: a wheel whose bytes do not match the index's sha256
// makes pip fail, and the mirror records hash_mismatch.
func checkTampered(t *testing.T, py, mirrorURL string, rec *recorder) {
	t.Helper()
	target, out, err := pip(t, py, mirrorURL, "bad-pkg")
	t.Logf("pip install bad-pkg:\n%s", out)
	if err == nil {
		t.Errorf("pip install bad-pkg succeeded with a tampered wheel\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(target, "bad_pkg")); err == nil {
		t.Error("the tampered wheel was installed")
	}
	e := rec.await(t, fetchOf("bad-pkg", "1.0"))
	if e == nil || e.Pkg.Outcome != "hash_mismatch" || (e.Pkg.Verified != nil && *e.Pkg.Verified) {
		t.Errorf("pkg.fetch of the tampered wheel = %+v, want hash_mismatch", e)
	}
}
