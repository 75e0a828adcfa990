package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// startMirror starts `sandtrail mirror` on a free loopback address, outside
// every session, with args added, and returns its npm registry URL and a
// function that stops it (the test's cleanup stops it too).
func (e *env) startMirror(t *testing.T, args ...string) (npmRegistry string, stop func()) {
	t.Helper()
	addr := freeAddr(t)
	m := e.cmd(append([]string{"mirror", "--listen", addr}, args...)...)
	var mlog strings.Builder
	m.Stderr = &mlog
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			m.Process.Signal(syscall.SIGTERM)
			m.Wait()
		}
	}
	t.Cleanup(stop)
	waitFor(t, "the mirror", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "http://" + addr + "/npm/", stop
}

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
}
