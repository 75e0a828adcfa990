package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunLockfilePortable: a package-lock.json that npm writes in a session
// names registry.npmjs.org, not the address of the mirror that `sandtrail
// run` hosted for the session (a port that is gone when the session ends),
// and `npm ci` of it outside every session works: here through a standalone
// mirror of the real registry, which npm reaches by its replace-registry-host
// rule as it reaches any mirror of the registry. Before the mirror served
// the registry's tarball URLs to npm, the lockfile named
// http://127.0.0.1:PORT/npm/… and `npm ci` failed with ECONNREFUSED.
func TestRunLockfilePortable(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("needs npm")
	}
	e := newEnv(t)
	r := e.run("--user", "nobody", "--timeout", "5m", "--", "sh", "-c", npmInstall("is-odd@3"))
	if r.code != 0 {
		t.Fatalf("npm install in a session: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	pkgs := lockPackages(t, r.stdout)
	if len(pkgs) < 2 {
		t.Fatalf("the lockfile has %d packages, want is-odd and is-number", len(pkgs))
	}
	for path, p := range pkgs {
		if !strings.HasPrefix(p.Resolved, "https://registry.npmjs.org/") {
			t.Errorf("%s: the lockfile names %s, want a URL on https://registry.npmjs.org/", path, p.Resolved)
		}
	}
	_, lock, _ := strings.Cut(r.stdout, "LOCKFILE\n")

	reg, _ := e.startMirror(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"p","version":"1.0.0","dependencies":{"is-odd":"^3"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--no-update-notifier", "--registry", reg, "--cache", filepath.Join(dir, ".npm"))
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("npm ci of the session's lockfile, outside the session: %v\n%s\nlockfile:\n%s", err, out, lock)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "is-number", "package.json")); err != nil {
		t.Errorf("npm ci installed no is-number: %v", err)
	}

	// The same lockfile without its resolved URLs, as npm writes it with
	// omit-lockfile-registry-resolved: npm ci takes each tarball's URL from
	// the packument and rewrites it onto the mirror's root, without /npm/.
	var lf map[string]any
	if err := json.Unmarshal([]byte(lock), &lf); err != nil {
		t.Fatal(err)
	}
	for _, p := range lf["packages"].(map[string]any) {
		delete(p.(map[string]any), "resolved")
	}
	bare, err := json.Marshal(lf)
	if err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	os.WriteFile(filepath.Join(dir2, "package.json"), []byte(`{"name":"p","version":"1.0.0","dependencies":{"is-odd":"^3"}}`), 0o644)
	if err := os.WriteFile(filepath.Join(dir2, "package-lock.json"), bare, 0o644); err != nil {
		t.Fatal(err)
	}
	c = exec.Command("npm", "ci", "--no-audit", "--no-fund", "--no-update-notifier", "--registry", reg, "--cache", filepath.Join(dir2, ".npm"))
	c.Dir = dir2
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("npm ci of the lockfile without resolved URLs: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir2, "node_modules", "is-odd", "package.json")); err != nil {
		t.Errorf("npm ci of the lockfile without resolved URLs installed no is-odd: %v", err)
	}
}

// TestRunManagersPointedAtMirror: in a session, every manager the mirror
// serves is pointed at the mirror `sandtrail run` hosts: npm's family (npm,
// pnpm, yarn 1 and berry, bun) at its /npm/, pip's (pip, uv) at its
// /pypi/simple/, cargo's crates.io on the sparse protocol; npm itself reads
// its registry from there.
func TestRunManagersPointedAtMirror(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("--", "sh", "-c", `env | sort; echo NPM; npm config get registry`)
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var mirror string
	for _, l := range strings.Split(r.stdout, "\n") {
		if v, ok := strings.CutPrefix(l, "SANDTRAIL_MIRROR="); ok {
			mirror = v
		}
	}
	if !strings.HasPrefix(mirror, "http://127.0.0.1:") {
		t.Fatalf("SANDTRAIL_MIRROR = %q, want the run's mirror on loopback\n%s", mirror, r.stdout)
	}
	for _, want := range []string{
		"npm_config_registry=" + mirror + "/npm/",
		"NPM_CONFIG_REGISTRY=" + mirror + "/npm/",
		"BUN_CONFIG_REGISTRY=" + mirror + "/npm/",
		"COREPACK_NPM_REGISTRY=" + mirror + "/npm",
		"YARN_REGISTRY=" + mirror + "/npm/",
		"YARN_NPM_REGISTRY_SERVER=" + mirror + "/npm/",
		"PIP_INDEX_URL=" + mirror + "/pypi/simple/",
		"UV_DEFAULT_INDEX=" + mirror + "/pypi/simple/",
		"UV_INDEX_URL=" + mirror + "/pypi/simple/",
		"CARGO_REGISTRIES_CRATES_IO_PROTOCOL=sparse",
		"NPM\n" + mirror + "/npm/",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the session lacks %q:\n%s", want, r.stdout)
		}
	}
}
