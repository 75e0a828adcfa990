package npm

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
	"github.com/sandtrail/sandtrail/shims"
)

// realNpm is the npm binary the read-back is tested against.
func realNpm(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/npm", "npm"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Skip("needs npm on this machine")
	return ""
}

// npmEnv is an environment that keeps npm to the fixture registry and
// temporary folders.
func npmEnv(t *testing.T, reg *npmtest.Registry) []string {
	home := t.TempDir()
	return []string{"PATH=/usr/bin:/bin", "HOME=" + home, "npm_config_registry=" + reg.URL + "/",
		"npm_config_cache=" + filepath.Join(home, ".npm"), "npm_config_update_notifier=false", "npm_config_audit=false",
		"npm_config_fund=false"}
}

// runPlanned plans npm ARGS in dir, runs the real npm with them and
// returns what Collect read back.
func runPlanned(t *testing.T, npm, dir string, env []string, args ...string) ([]shims.Package, *shims.Plan) {
	t.Helper()
	c := shims.Context{Dir: dir, Getenv: getenvOf(env), TempDir: t.TempDir()}
	p, err := Plan(args, c)
	if err != nil || p == nil {
		t.Fatalf("Plan(%q) = %v, %v, want a plan", args, p, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	exit := 0
	if err != nil {
		t.Logf("npm %q: %v\n%s", args, err, out)
		exit = 1
	}
	got, err := p.Collect(exit)
	if err != nil {
		t.Fatalf("Collect after npm %q: %v", args, err)
	}
	return got, p
}

func getenvOf(env []string) func(string) string {
	return func(k string) string {
		for _, kv := range slices.Backward(env) {
			if len(kv) > len(k) && kv[:len(k)] == k && kv[len(k)] == '=' {
				return kv[len(k)+1:]
			}
		}
		return ""
	}
}

func npmtestStart(t *testing.T) *npmtest.Registry { return npmtest.Start(t, fixture()...) }

func fixture() []npmtest.Package {
	old := time.Now().Add(-30 * 24 * time.Hour)
	return []npmtest.Package{
		{Name: "left-pad", Versions: []npmtest.Version{{Version: "1.3.0", Published: old}, {Version: "1.3.1", Published: old}}},
		{Name: "has-dep", Versions: []npmtest.Version{{Version: "2.0.0", Published: old, Deps: map[string]string{"@fx/leaf": "^1.0.0"},
			Scripts: map[string]string{"postinstall": "node -e 0"}}}},
		{Name: "@fx/leaf", Versions: []npmtest.Version{{Version: "1.0.0", Published: old}, {Version: "1.0.1", Published: old}}},
	}
}

// integrityOf is the fixture's SRI of name@version.
func integrityOf(name, version string) string {
	for _, p := range fixture() {
		for _, v := range p.Versions {
			if p.Name == name && v.Version == version {
				return npmtest.Integrity(npmtest.Tarball(name, v))
			}
		}
	}
	return ""
}

// TestRealInstall runs the real npm install against the fixture
// registry: the direct package, a package with a transitive dependency
// and install script, then an update that changes one package only.
func TestRealInstall(t *testing.T) {
	npm := realNpm(t)
	reg := npmtest.Start(t, fixture()...)
	env := npmEnv(t, reg)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"proj","version":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, p := runPlanned(t, npm, dir, env, "install", "--no-audit", "--no-fund", "left-pad@^1.3.0", "has-dep")
	if want := []shims.Request{{Name: "left-pad", Spec: "^1.3.0", Registry: reg.URL + "/", Origin: "argv"}, {Name: "has-dep", Registry: reg.URL + "/", Origin: "argv"}}; !slices.Equal(p.Requests, want) {
		t.Errorf("Plan(install).Requests = %+v, want %+v", p.Requests, want)
	}
	want := []shims.Package{
		{Name: "@fx/leaf", Version: "1.0.1", SourceURL: reg.URL + npmtest.TarballPath("@fx/leaf", "1.0.1"), Hash: integrityOf("@fx/leaf", "1.0.1"), RequestedBy: "has-dep", RequiredBy: []string{"has-dep"}, Path: "node_modules/@fx/leaf"},
		{Name: "has-dep", Version: "2.0.0", SourceURL: reg.URL + npmtest.TarballPath("has-dep", "2.0.0"), Hash: integrityOf("has-dep", "2.0.0"), Direct: true, InstallScripts: []string{"postinstall"}, Path: "node_modules/has-dep"},
		{Name: "left-pad", Version: "1.3.1", SourceURL: reg.URL + npmtest.TarballPath("left-pad", "1.3.1"), Hash: integrityOf("left-pad", "1.3.1"), Direct: true, Requested: "^1.3.0", Path: "node_modules/left-pad"},
	}
	checkPackages(t, "install", got, want)

	// A second install that pins one package reports the whole tree it
	// leaves, not only what changed.
	got, _ = runPlanned(t, npm, dir, env, "i", "left-pad@1.3.0", "--no-audit")
	pinned := slices.Clone(want)
	pinned[1].Requested = "^2.0.0" // package.json's now
	pinned[2] = shims.Package{Name: "left-pad", Version: "1.3.0", SourceURL: reg.URL + npmtest.TarballPath("left-pad", "1.3.0"),
		Hash: integrityOf("left-pad", "1.3.0"), Direct: true, Requested: "1.3.0", Path: "node_modules/left-pad"}
	checkPackages(t, "i left-pad@1.3.0", got, pinned)

	// npm ci from the lockfile reinstalls the tree: every package is
	// reported, with package.json's specs.
	got, p = runPlanned(t, npm, dir, env, "ci")
	fromLock := slices.Clone(pinned)
	fromLock[2].Requested = "^1.3.0"
	checkPackages(t, "ci", got, fromLock)
	if len(p.Requests) != 2 || p.Requests[0].Origin != "package.json" {
		t.Errorf("Plan(ci).Requests = %+v, want package.json's two", p.Requests)
	}

	// npm install in a fresh copy of the project with its lockfile
	// installs the lockfile's tree, all of it reported.
	fresh := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(fresh, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, _ = runPlanned(t, npm, fresh, env, "install", "--no-audit")
	checkPackages(t, "install from a lockfile", got, fromLock)
}

// TestRealInstallFailed: a failed install still reports what it changed
// (here nothing), without an error.
func TestRealInstallFailed(t *testing.T) {
	npm := realNpm(t)
	reg := npmtest.Start(t, fixture()...)
	got, _ := runPlanned(t, npm, t.TempDir(), npmEnv(t, reg), "install", "no-such-pkg")
	if len(got) != 0 {
		t.Errorf("Collect after a failed install = %+v, want nothing", got)
	}
}

// TestRealGlobal: npm install -g --prefix writes the hidden lockfile of
// the global folder, which Collect reads.
func TestRealGlobal(t *testing.T) {
	npm := realNpm(t)
	reg := npmtest.Start(t, fixture()...)
	prefix := t.TempDir()
	got, _ := runPlanned(t, npm, t.TempDir(), npmEnv(t, reg), "install", "-g", "--prefix", prefix, "left-pad@1.3.0")
	checkPackages(t, "install -g", got, []shims.Package{{Name: "left-pad", Version: "1.3.0",
		SourceURL: reg.URL + npmtest.TarballPath("left-pad", "1.3.0"), Hash: integrityOf("left-pad", "1.3.0"), Direct: true, Requested: "1.3.0", Path: "node_modules/left-pad"}})
}

func checkPackages(t *testing.T, what string, got, want []shims.Package) {
	t.Helper()
	g, _ := json.MarshalIndent(got, "", " ")
	w, _ := json.MarshalIndent(want, "", " ")
	if string(g) != string(w) {
		t.Errorf("Collect after %s = %s, want %s", what, g, w)
	}
}

// TestRealBundled: a package whose tarball bundles a dependency with a
// postinstall, installed beside the registry's copy of that dependency's
// name and version, is read back as three packages, one per install path:
// the carrier, the registry's copy, and the bundled copy with the
// carrier's purl and no source or hash of its own. The same, read from
// the global folder's tree.
func TestRealBundled(t *testing.T) {
	npm := realNpm(t)
	old := time.Now().Add(-30 * 24 * time.Hour)
	inner := npmtest.Version{Version: "1.0.0", Published: old}
	carrier := npmtest.Version{Version: "1.0.0", Published: old,
		Bundled: map[string]npmtest.Version{"inner": {Version: "1.0.0", Scripts: map[string]string{"postinstall": "node -e 0"}}}}
	reg := npmtest.Start(t,
		npmtest.Package{Name: "carrier", Versions: []npmtest.Version{carrier}},
		npmtest.Package{Name: "inner", Versions: []npmtest.Version{inner}})
	vs := map[string]npmtest.Version{"carrier": carrier, "inner": inner}
	integrity := func(name string) string { return npmtest.Integrity(npmtest.Tarball(name, vs[name])) }
	env := npmEnv(t, reg)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"proj","version":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []shims.Package{
		{Name: "carrier", Version: "1.0.0", SourceURL: reg.URL + npmtest.TarballPath("carrier", "1.0.0"), Hash: integrity("carrier"),
			Direct: true, Requested: "1.0.0", Path: "node_modules/carrier"},
		{Name: "inner", Version: "1.0.0", RequestedBy: "carrier", RequiredBy: []string{"carrier"}, InstallScripts: []string{"postinstall"},
			Path: "node_modules/carrier/node_modules/inner", BundledIn: "pkg:npm/carrier@1.0.0"},
		{Name: "inner", Version: "1.0.0", SourceURL: reg.URL + npmtest.TarballPath("inner", "1.0.0"), Hash: integrity("inner"),
			Direct: true, Requested: "1.0.0", Path: "node_modules/inner"},
	}
	got, _ := runPlanned(t, npm, dir, env, "install", "carrier@1.0.0", "inner@1.0.0")
	checkPackages(t, "install carrier inner", got, want)

	prefix := t.TempDir()
	got, _ = runPlanned(t, npm, t.TempDir(), env, "install", "-g", "--prefix", prefix, "carrier@1.0.0")
	checkPackages(t, "install -g carrier", got, want[:2])
}
