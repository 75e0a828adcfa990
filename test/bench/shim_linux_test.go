package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
	"github.com/sandtrail/sandtrail/test/shimtest"
)

// BenchmarkShimVersion measures what the shim adds to a call without
// install intent: `npm --version`, `pip --version` and `cargo --version`
// through sandtrail-shim (linked as each, first on PATH) against the real
// binary called directly, alternating, in the same run. It reports the
// medians and the shim's added milliseconds (target: ≤3 ms). Those calls
// take the fast path (shims/front); `fixture` is `npm --version` with a
// copy of /bin/true as the real npm (the shim's cost without node's
// spread), and `install-intent` times the path every
// install takes up to the real manager (the planner, a policy check that
// finds no daemon, the exec), with a fixture manager that exits at once,
// against the fixture called directly.
func BenchmarkShimVersion(b *testing.B) {
	dir := b.TempDir()
	shim := filepath.Join(dir, "sandtrail-shim")
	if err := shimtest.Build(shim); err != nil {
		b.Fatal(err)
	}
	shims := filepath.Join(dir, "shims")
	if err := shimtest.Link(shim, shims, "npm", "pip", "cargo"); err != nil {
		b.Fatal(err)
	}
	// The floor: the shim's own start-up, `sandtrail-shim list` (no
	// manager, no exec), against /bin/true.
	b.Run("startup", func(b *testing.B) {
		time1 := func(argv ...string) time.Duration {
			start := time.Now()
			if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
				b.Fatalf("%q: %v\n%s", argv, err, out)
			}
			return time.Since(start)
		}
		var base, own []time.Duration
		for range b.N {
			for range 20 {
				base = append(base, time1("/bin/true"))
				own = append(own, time1(shim, "list"))
			}
		}
		d, s := medianDuration(base), medianDuration(own)
		b.ReportMetric(float64(d.Microseconds())/1000, "true-ms")
		b.ReportMetric(float64(s.Microseconds())/1000, "shim-ms")
		b.ReportMetric(float64((s-d).Microseconds())/1000, "added-ms")
	})
	b.Run("install-intent", func(b *testing.B) { benchInstallIntent(b, shim) })
	// fixture is `npm --version` with a copy of /bin/true as the real npm:
	// the shim's own cost, without node's run-to-run spread.
	fixture := filepath.Join(dir, "fixture", "npm")
	if err := copyFile("/bin/true", fixture); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, cmd, real string }{
		{"fixture", "npm", fixture}, {"npm", "npm", "/usr/bin/npm"}, {"pip", "pip", "/usr/bin/pip"},
		{"cargo", "cargo", cargoPath()},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.real == "" {
				b.Skipf("%s is not installed", tc.name)
			}
			if _, err := os.Stat(tc.real); err != nil {
				b.Skipf("%s is not installed: %v", tc.name, err)
			}
			link := filepath.Join(shims, tc.cmd)
			env := append(os.Environ(), "PATH="+shims+":"+filepath.Dir(tc.real)+":/usr/bin:/bin")
			run := func(path string) time.Duration {
				cmd := exec.Command(path, "--version")
				cmd.Env = env
				start := time.Now()
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%s --version: %v\n%s", path, err, out)
				}
				return time.Since(start)
			}
			run(link) // warm the page cache for both
			run(tc.real)
			var direct, shimmed []time.Duration
			b.ResetTimer()
			for range b.N {
				for range 5 {
					direct = append(direct, run(tc.real))
					shimmed = append(shimmed, run(link))
				}
			}
			d, s := medianDuration(direct), medianDuration(shimmed)
			b.ReportMetric(float64(d.Microseconds())/1000, "direct-ms")
			b.ReportMetric(float64(s.Microseconds())/1000, "shim-ms")
			b.ReportMetric(float64((s-d).Microseconds())/1000, "added-ms")
			// The lower decile's difference: what the shim adds when
			// neither call waited for a CPU (other benchmarks share them).
			b.ReportMetric((quantileUS(shimmed, 0.1)-quantileUS(direct, 0.1))/1000, "added-p10-ms")
			b.ReportMetric(float64(s)/float64(d), "ratio")
		})
	}
}

// benchInstallIntent times `cargo install ripgrep` through the shim,
// whose real cargo is /bin/true and whose daemon socket does not exist
// (outside a session the shim warns and runs the install unchecked),
// against /bin/true called directly.
func benchInstallIntent(b *testing.B, shim string) {
	dir := b.TempDir()
	shims := filepath.Join(dir, "shims")
	if err := shimtest.Link(shim, shims, "cargo"); err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+shims+":/usr/bin:/bin", "SANDTRAIL_REAL_CARGO=/bin/true",
		"SANDTRAIL_SOCKET="+filepath.Join(dir, "none.sock"), "CARGO_HOME="+filepath.Join(dir, "cargo"))
	run := func(path string) time.Duration {
		cmd := exec.Command(path, "install", "ripgrep")
		cmd.Env, cmd.Dir = env, dir
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s install ripgrep: %v\n%s", path, err, out)
		}
		return time.Since(start)
	}
	link := filepath.Join(shims, "cargo")
	run(link)
	var direct, shimmed []time.Duration
	b.ResetTimer()
	for range b.N {
		for range 5 {
			direct = append(direct, run("/bin/true"))
			shimmed = append(shimmed, run(link))
		}
	}
	d, s := medianDuration(direct), medianDuration(shimmed)
	b.ReportMetric(float64(d.Microseconds())/1000, "direct-ms")
	b.ReportMetric(float64(s.Microseconds())/1000, "shim-ms")
	b.ReportMetric(float64((s-d).Microseconds())/1000, "added-ms")
	b.ReportMetric((quantileUS(shimmed, 0.1)-quantileUS(direct, 0.1))/1000, "added-p10-ms")
}

// copyFile copies the executable src to dst, making dst's directory.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// cargoPath is cargo on PATH, or "".
func cargoPath() string {
	p, err := exec.LookPath("cargo")
	if err != nil {
		return ""
	}
	return p
}

func medianDuration(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(median(xs))
}

// shimTree is the size of BenchmarkShimInstall's package tree.
const shimTree = 50

// BenchmarkShimInstall measures an `npm install` of a tree of shimTree
// packages through the whole package path (the shim, its policy check
// with a real `sandtrail daemon`, the daemon's warm verifying mirror and
// the read-back and record of every package) against npm installing the
// same tree straight from the loopback fixture registry, alternating, in
// the same run. It reports the medians and their ratio.
func BenchmarkShimInstall(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("skipping: the daemon needs root")
	}
	if _, err := os.Stat("/usr/bin/npm"); err != nil {
		b.Skip("skipping: needs /usr/bin/npm")
	}
	dir := b.TempDir()
	bin, shim := filepath.Join(dir, "sandtrail"), filepath.Join(dir, "sandtrail-shim")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sandtrail/sandtrail/cmd/sandtrail").CombinedOutput(); err != nil {
		b.Fatalf("building sandtrail: %v\n%s", err, out)
	}
	if err := shimtest.Build(shim); err != nil {
		b.Fatal(err)
	}
	shims := filepath.Join(dir, "shims")
	if err := shimtest.Link(shim, shims, "npm"); err != nil {
		b.Fatal(err)
	}
	up := npmtest.Start(b, npmtest.Tree(shimTree, 20000)...)
	data, sock, addr := filepath.Join(dir, "data"), filepath.Join(dir, "ingest.sock"), freePort(b)
	pol := filepath.Join(dir, "policy.yaml")
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(pol, []byte("sources:\n  registries:\n    npm: ["+up.URL+"/]\n"), 0o644)
	os.WriteFile(cfg, []byte("policy: "+pol+"\nmirror:\n  enabled: true\n  listen: "+addr+"\n  upstreams:\n    npm: "+up.URL+"/\n"), 0o644)
	if out, err := exec.Command(bin, "--data", data, "keys", "generate").CombinedOutput(); err != nil {
		b.Fatalf("sandtrail keys generate: %v\n%s", err, out)
	}
	daemon := exec.Command(bin, "--config", cfg, "--data", data, "--log-level", "warn", "daemon", "--socket", sock)
	daemon.Stderr = os.Stderr
	startServer(b, "sandtrail daemon", "http://"+addr+"/npm/", addr, daemon)
	env := append(os.Environ(), "PATH="+shims+":/usr/bin:/bin", "SANDTRAIL_SOCKET="+sock)
	install := func(npm, registry string) time.Duration {
		work, err := os.MkdirTemp("", "sandtrail-bench-shim-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(work)
		os.WriteFile(filepath.Join(work, "package.json"), []byte(`{"name":"b","version":"1.0.0"}`), 0o644)
		cmd := exec.Command(npm, "install", "--no-audit", "--no-fund", "--no-update-notifier", "--registry", registry,
			"--cache", filepath.Join(work, ".npm"), "pkg-0")
		cmd.Dir, cmd.Env = work, env
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s install: %v\n%s", npm, err, out)
		}
		return time.Since(start)
	}
	viaShim := filepath.Join(shims, "npm")
	install(viaShim, "http://"+addr+"/npm/") // warm the mirror's cache
	var direct, shimmed []time.Duration
	b.ResetTimer()
	for range b.N {
		direct = append(direct, install("/usr/bin/npm", up.URL+"/"))
		shimmed = append(shimmed, install(viaShim, "http://"+addr+"/npm/"))
	}
	d, s := medianDuration(direct), medianDuration(shimmed)
	b.ReportMetric(float64(d.Milliseconds()), "direct-ms")
	b.ReportMetric(float64(s.Milliseconds()), "shim+mirror-ms")
	b.ReportMetric(float64(s)/float64(d), "ratio")
}
