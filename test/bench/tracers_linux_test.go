package bench

import (
	"bytes"
	"os/exec"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
)

// tracerStormScript is an exec storm run by sh: 2,000 fork+exec of
// /bin/true, for the tracers that follow a process tree from its root
// (strace), where BenchmarkCollectorExecStorm's storm is driven by the
// test process itself.
const tracerStormScript = `i=0
while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done
`

// tracerStrace is how strace runs: following every fork, tracing the
// process and file syscalls (what the collector records of a session),
// writing its trace to /dev/null.
var tracerStrace = []string{"strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=%process,%file"}

// BenchmarkCollectorTracers runs the exec storm (2,000 execs driven by sh)
// and the file-heavy workload (BenchmarkCollectorFiles's
// untar-walk) three ways, in a
// test cgroup: with no tracer, with the sandtrail collector watching the
// cgroup, and under strace (tracerStrace), the rounds interleaved with the
// order rotating. It reports, for each workload, the median per-round
// ratios of wall time against no tracer (x-sandtrail-wall, x-strace-wall)
// and sandtrail's overhead as a share of strace's
// (overhead-vs-strace-wall). auditd, which sees only the execs, is
// compared in BenchmarkCollectorExecStorm.
func BenchmarkCollectorTracers(b *testing.B) {
	tarball, _, cg, home := ioFilesSetup(b, "strace")
	// The file workload (untar and walk) only: under strace the
	// stricter one takes half a minute a run.
	workloads := []struct{ name, script, cleanup string }{{"exec-storm", tracerStormScript, ""}, ioFilesWorkloads[0]}
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			tracerCompare(b, cg, tarball, home, w.script, w.cleanup)
		})
	}
}

// tracerCompare is one workload of BenchmarkCollectorTracers.
func tracerCompare(b *testing.B, cg *cgrouptest.Cgroup, tarball, home, script, cleanup string) {
	run := func(prefix ...string) time.Duration {
		b.Helper()
		argv := append(prefix, "/bin/sh", "-c", script, "sh", tarball, home)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.SysProcAttr = cg.SysProcAttr(b, -1)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("%q: %v: %s", argv, err, stderr.Bytes())
		}
		d := time.Since(start)
		if cleanup != "" {
			c := exec.Command("/bin/sh", "-c", cleanup)
			c.Dir = home
			if out, err := c.CombinedOutput(); err != nil {
				b.Fatalf("cleaning up after the workload: %v: %s", err, out)
			}
		}
		return d
	}
	run() // warm up: the page cache holds the tarball from here on
	var none, sandtrail, strace []time.Duration
	runNone := func() { ioSettle(b, cg); none = append(none, run()) }
	runSandtrail := func() {
		ic := ioStartCollector(b, cg.ID, home)
		ioSettle(b, cg)
		sandtrail = append(sandtrail, run())
		ic.close()
	}
	runStrace := func() { ioSettle(b, cg); strace = append(strace, run(tracerStrace...)) }
	orders := [][]func(){
		{runNone, runSandtrail, runStrace},
		{runSandtrail, runStrace, runNone},
		{runStrace, runNone, runSandtrail},
	}
	b.ResetTimer()
	for i := range ioPairs(3) * b.N {
		for _, f := range orders[i%3] {
			f()
		}
	}
	b.StopTimer()
	xs, xt := collectorRatio(sandtrail, none), collectorRatio(strace, none)
	ms := func(ds []time.Duration) float64 { return float64(collectorSum(ds).Milliseconds()) / float64(len(ds)) }
	b.ReportMetric(ms(none), "ms/run-none")
	b.ReportMetric(ms(sandtrail), "ms/run-sandtrail")
	b.ReportMetric(ms(strace), "ms/run-strace")
	b.ReportMetric(xs, "x-sandtrail-wall")
	b.ReportMetric(xt, "x-strace-wall")
	b.ReportMetric((xs-1)/(xt-1), "overhead-vs-strace-wall")
}
