package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/test/shimtest"
)

// BenchmarkShimVersion measures what the shim adds to a call without
// install intent: `npm --version`, `pip --version` and `cargo --version`
// through sandtrail-shim (linked as each, first on PATH) against the real
// binary called directly, alternating, in the same run. It reports the
// medians and the shim's added milliseconds (target: ≤3 ms).
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
	for _, tc := range []struct{ name, real string }{
		{"npm", "/usr/bin/npm"}, {"pip", "/usr/bin/pip"}, {"cargo", cargoPath()},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.real == "" {
				b.Skipf("%s is not installed", tc.name)
			}
			if _, err := os.Stat(tc.real); err != nil {
				b.Skipf("%s is not installed: %v", tc.name, err)
			}
			link := filepath.Join(shims, tc.name)
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
			b.ReportMetric(float64(s)/float64(d), "ratio")
		})
	}
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
