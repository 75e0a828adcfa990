package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
)

// TestMirrorNpmRegistry: the mirror against the real npm registry:
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
		if !strings.HasPrefix(p.Resolved, "https://registry.npmjs.org/") {
			t.Errorf("%s: the lockfile resolved it from %s, not the registry (npm fetches that through the mirror)", name, p.Resolved)
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
	// Pinned, the version inside the cooldown is refused by the shim
	// before npm runs; with the shim bypassed, the mirror still hides it.
	r = e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", npmInstall("cool@1.1.0"))
	if r.code == 0 || !strings.Contains(r.stdout, "refused") || !strings.Contains(r.stdout, "cooldown.min_age") {
		t.Errorf("a pinned install of the version inside the cooldown: exit %d, want the shim's refusal by cooldown.min_age\n%s", r.code, r.stdout)
	}
	if b := kinds(e.events(r.summary.SessionID), event.KindPkgBlocked); len(b) != 1 || b[0].Pkg.Rule != "cooldown.min_age" {
		t.Errorf("pkg.blocked = %v, want one by cooldown.min_age", b)
	}
	r = e.run("--user", "nobody", "--policy", pol, "--", "sh", "-c", strings.ReplaceAll(npmInstall("cool@1.1.0"), "\nnpm install", "\n/usr/bin/npm install"))
	if r.code == 0 || !strings.Contains(r.stdout, "No matching version") {
		t.Errorf("a pinned install of the version inside the cooldown, past the shim: exit %d, want npm's no-matching-version failure\n%s", r.code, r.stdout)
	}
	if n := reg.Count(npmtest.TarballPath("cool", "1.1.0")); n != 0 {
		t.Errorf("the fixture served the hidden version's tarball %d times", n)
	}
	e.verify()
}

// TestMirrorNpmConcurrent: 50 concurrent `npm install`s of one tree
// through `sandtrail mirror` cause exactly one upstream fetch per artifact
// and packument, and the mirror's peak RSS stays under 256 MiB.
func TestMirrorNpmConcurrent(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("needs npm")
	}
	const n, clients = 60, 50
	reg := npmtest.Start(t, npmtest.Tree(n, 10000)...)
	e := newEnv(t)
	pol := writePolicy(t, fmt.Sprintf("sources:\n  registries:\n    npm: [%s/]\n", reg.URL))
	addr := freeAddr(t)
	m := e.cmd("mirror", "--listen", addr, "--upstream", "npm="+reg.URL+"/", "--policy", pol)
	var mlog strings.Builder
	m.Stderr = &mlog
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { m.Process.Signal(syscall.SIGTERM); m.Wait() }()
	waitFor(t, "the mirror", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	dir := t.TempDir()
	errs := make(chan error, clients)
	for i := range clients {
		go func() {
			d := filepath.Join(dir, strconv.Itoa(i))
			os.MkdirAll(d, 0o755)
			os.WriteFile(filepath.Join(d, "package.json"), []byte(`{"name":"c","version":"1.0.0"}`), 0o644)
			c := exec.Command("npm", "install", "--no-audit", "--no-fund", "--no-update-notifier", "--registry", "http://"+addr+"/npm/",
				"--cache", filepath.Join(d, ".npm"), "pkg-0")
			c.Dir = d
			out, err := c.CombinedOutput()
			if err != nil {
				err = fmt.Errorf("npm install #%d: %v\n%s", i, err, out)
			}
			errs <- err
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for i := range n {
		name := fmt.Sprintf("pkg-%d", i)
		if c := reg.Count(npmtest.TarballPath(name, "1.0.0")); c != 1 {
			t.Errorf("%s: the upstream served its tarball %d times, want 1", name, c)
		}
		if c := reg.Count("/" + name); c != 1 {
			t.Errorf("%s: the upstream served its packument %d times, want 1", name, c)
		}
	}
	hwm := peakRSS(t, m.Process.Pid)
	t.Logf("%d installs of %d packages; the mirror's peak RSS %d MiB", clients, n, hwm>>20)
	if hwm >= 256<<20 {
		t.Errorf("the mirror's peak RSS is %d MiB, want under 256 MiB", hwm>>20)
	}
	served := 0
	for _, ev := range kinds(e.eventsAfterStop(t, m), event.KindPkgFetch) {
		if ev.Pkg.Outcome == "served" && ev.Pkg.Verified != nil && *ev.Pkg.Verified {
			served++
		}
	}
	if served != n*clients {
		t.Errorf("%d verified pkg.fetch events, want %d (one per tarball per install)\n%s", served, n*clients, mlog.String())
	}
}

// peakRSS is a process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// eventsAfterStop stops the process m (SIGTERM), so that its journal is
// closed, and reads every event.
func (e *env) eventsAfterStop(t *testing.T, m *exec.Cmd) []*event.Event {
	t.Helper()
	m.Process.Signal(syscall.SIGTERM)
	m.Wait()
	return e.events("")
}

// TestDaemonMirror: the daemon hosts the mirror when its config has a
// mirror: section, a `sandtrail run` session it hosts installs through it
// (the daemon points the session's npm at it), and each fetch is recorded
// in that session, attributed by the kernel (the client socket's cgroup).
func TestDaemonMirror(t *testing.T) {
	t.Parallel()
	reg := npmtest.Start(t, npmtest.Tree(7, 1000)...)
	e := newEnv(t)
	addr := freeAddr(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("mirror:\n  listen: %s\n  upstreams:\n    npm: %s/\n", addr, reg.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "SANDTRAIL_CONFIG="+cfg)
	_, _, stop := startDNSDaemon(t, e, fmt.Sprintf("sources:\n  registries:\n    npm: [%s/]\n", reg.URL))
	defer stop()
	r := e.run("--user", "nobody", "--", "sh", "-c", npmInstall("pkg-0"))
	if r.code != 0 || r.summary.HostedBy != "daemon" {
		t.Fatalf("npm install in a daemon's session: exit %d, hosted by %q\n%s\n%s", r.code, r.summary.HostedBy, r.stdout, r.stderr)
	}
	stop()
	got := map[string]bool{}
	for _, ev := range kinds(e.events(""), event.KindPkgFetch) {
		if ev.SessionID != r.summary.SessionID {
			t.Errorf("pkg.fetch of %s in session %q, want %q (the session whose npm fetched it)", ev.Pkg.Name, ev.SessionID, r.summary.SessionID)
			continue
		}
		if ev.Pkg.Outcome == "served" && ev.Pkg.Verified != nil && *ev.Pkg.Verified {
			got[ev.Pkg.Name] = true
		}
	}
	if len(got) != 7 {
		t.Errorf("verified pkg.fetch events in the session for %d packages, want 7: %v", len(got), got)
	}
}
