package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/collector"
	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
)

// collectorStormExecs is the size of one exec storm; SANDTRAIL_BENCH_EXECS
// overrides it.
func collectorStormExecs() int {
	if n, err := strconv.Atoi(os.Getenv("SANDTRAIL_BENCH_EXECS")); err == nil && n > 0 {
		return n
	}
	return 20000
}

// collectorCPU returns the CPU time (user + system) of this process and of
// its waited-for children so far.
func collectorCPU() time.Duration {
	var self, kids unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &self)
	unix.Getrusage(unix.RUSAGE_CHILDREN, &kids)
	tv := func(t unix.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// collectorStorm forks and execs /bin/true n times inside cg, from two
// goroutines (the machine has two cores), and returns how long it took.
func collectorStorm(b *testing.B, cg *cgrouptest.Cgroup, n int) (time.Duration, error) {
	start := time.Now()
	err := cg.ExecStorm(b, n, 2)
	return time.Since(start), err
}

// collectorAuditd is an auditd started by the benchmark with an execve rule.
type collectorAuditd struct {
	cmd         *exec.Cmd
	wasEnabled  string
	ruleAdded   bool
	rule        []string
	startedLost uint64
}

func collectorAuditStatus() (map[string]string, error) {
	out, err := exec.Command("auditctl", "-s").Output()
	if err != nil {
		return nil, fmt.Errorf("auditctl -s: %w", err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok {
			m[k] = v
		}
	}
	return m, nil
}

// collectorStartAuditd starts auditd in the foreground and adds the rule
// `-a always,exit -F arch=b64 -S execve`.
func collectorStartAuditd() (*collectorAuditd, error) {
	st, err := collectorAuditStatus()
	if err != nil {
		return nil, err
	}
	if st["pid"] != "0" {
		return nil, fmt.Errorf("an audit daemon (pid %s) is already running", st["pid"])
	}
	a := &collectorAuditd{wasEnabled: st["enabled"],
		rule: []string{"always,exit", "-F", "arch=b64", "-S", "execve", "-k", "sandtrail-bench"}}
	a.cmd = exec.Command("/usr/sbin/auditd", "-n")
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting auditd: %w", err)
	}
	for i := 0; ; i++ {
		st, err := collectorAuditStatus()
		if err == nil && st["pid"] == strconv.Itoa(a.cmd.Process.Pid) {
			a.startedLost, _ = strconv.ParseUint(st["lost"], 10, 64)
			break
		}
		if i == 100 {
			a.stop()
			return nil, errors.New("auditd did not register with the kernel")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := exec.Command("auditctl", append([]string{"-a"}, a.rule...)...).CombinedOutput(); err != nil {
		a.stop()
		return nil, fmt.Errorf("adding the audit rule: %v: %s", err, out)
	}
	a.ruleAdded = true
	return a, nil
}

// lost returns the audit records the kernel lost since the start.
func (a *collectorAuditd) lost() uint64 {
	st, err := collectorAuditStatus()
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(st["lost"], 10, 64)
	return n - a.startedLost
}

// stop removes the rule, stops the auditd it started (by pid) and restores
// the audit enabled flag.
func (a *collectorAuditd) stop() error {
	var errs []error
	if a.ruleAdded {
		if out, err := exec.Command("auditctl", append([]string{"-d"}, a.rule...)...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("removing the audit rule: %v: %s", err, out))
		}
		a.ruleAdded = false
	}
	if a.cmd != nil && a.cmd.Process != nil {
		a.cmd.Process.Signal(syscall.SIGTERM)
		a.cmd.Wait()
		a.cmd = nil
	}
	if a.wasEnabled != "" {
		if out, err := exec.Command("auditctl", "-e", a.wasEnabled).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("restoring audit enabled=%s: %v: %s", a.wasEnabled, err, out))
		}
	}
	return errors.Join(errs...)
}

// collectorRuns are the measurements of one configuration, one per slice.
type collectorRuns struct {
	wall, cpu []time.Duration
}

func (r *collectorRuns) add(wall, cpu time.Duration) {
	r.wall = append(r.wall, wall)
	r.cpu = append(r.cpu, cpu)
}

func collectorSum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

// median returns the median of xs (the upper one of an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// collectorRatios returns x[i]/y[i] for every slice (or pair), sorted.
func collectorRatios(x, y []time.Duration) []float64 {
	rs := make([]float64, len(x))
	for i := range x {
		rs[i] = float64(x[i]) / float64(y[i])
	}
	slices.Sort(rs)
	return rs
}

// collectorRatio returns the median over the slices of x[i]/y[i].
func collectorRatio(x, y []time.Duration) float64 {
	return median(collectorRatios(x, y))
}

// collectorSpread reports the quartiles of the per-pair wall ratios of
// coll over base (metrics x-sandtrail-wall-q1 and -q3) and logs them all:
// on these machines one pair can differ from the next by as much as the
// effect measured, so the median alone hides how sure it is.
func collectorSpread(b *testing.B, coll, base []time.Duration) {
	b.Helper()
	rs := collectorRatios(coll, base)
	b.ReportMetric(rs[len(rs)/4], "x-sandtrail-wall-q1")
	b.ReportMetric(rs[(3*len(rs))/4], "x-sandtrail-wall-q3")
	b.Logf("per-pair wall ratios, sorted: %.3f", rs)
}

// collectorSlices is how many interleaved slices the storm is cut into;
// SANDTRAIL_BENCH_SLICES overrides it.
func collectorSlices() int {
	if n, err := strconv.Atoi(os.Getenv("SANDTRAIL_BENCH_SLICES")); err == nil && n > 0 {
		return n
	}
	return 20
}

// BenchmarkCollectorExecStorm runs the exec storm (20,000 fork+exec+wait of
// /bin/true) three ways: with no collector, with the sandtrail collector
// watching the storm's cgroup, and with auditd logging every execve. The
// machine's load drifts, so each storm is cut into slices (20 of 1,000)
// that run interleaved, the order rotating, and every slice of sandtrail or
// auditd is compared with the no-collector slice next to it; the ratios
// reported are the medians of those per-slice ratios, for wall time and for
// the CPU time of this process (driver, collector and consumer) and its
// children (the execs, and auditd; the kauditd kernel thread is not
// counted). Run it with -benchtime=1x.
func BenchmarkCollectorExecStorm(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("skipping: the collector and auditd need root")
	}
	n, k := collectorStormExecs(), collectorSlices()
	if n%k != 0 {
		b.Fatalf("%d execs do not cut into %d slices", n, k)
	}
	per := n / k
	cg := cgrouptest.New(b)
	cgid := cg.ID
	if _, err := collectorStorm(b, cg, 2000); err != nil { // warm up
		b.Fatal(err)
	}
	auditdReason := ""
	if _, err := exec.LookPath("/usr/sbin/auditd"); err != nil {
		auditdReason = "auditd is not installed (apt-get install -y auditd)"
	}

	// Each configuration first runs a short untimed storm, so that what
	// is timed is the steady state (a collector or auditd runs for long),
	// not the moments after attaching; and the previous configuration's
	// teardown gets time to finish in the kernel.
	settle := func() {
		time.Sleep(300 * time.Millisecond)
		if _, err := collectorStorm(b, cg, 200); err != nil {
			b.Fatal(err)
		}
	}
	var base, coll, audit collectorRuns
	var received, lost, auditLost uint64
	runBase := func() {
		settle()
		cpu := collectorCPU()
		d, err := collectorStorm(b, cg, per)
		if err != nil {
			b.Fatal(err)
		}
		base.add(d, collectorCPU()-cpu)
	}
	// The collector as the host runs it: every exec's identity and hash,
	// and the default policy's environment variables.
	pol, err := policies.Parse("default.yaml", policies.DefaultYAML())
	if err != nil {
		b.Fatal(err)
	}
	eng, err := policies.New(pol)
	if err != nil {
		b.Fatal(err)
	}
	runCollector := func() {
		c, err := collector.New(nil, collector.WithQueueSize(1<<16), collector.WithExecEnv(eng.ExecEnv()))
		if err != nil {
			b.Fatalf("collector.New() = %v", err)
		}
		if err := c.Watch(cgid, "bench"); err != nil {
			b.Fatal(err)
		}
		done := make(chan [2]uint64)
		var warm int
		go func() {
			var got, l uint64
			for ev := range c.Events() {
				switch ev.Kind {
				case event.KindLoss:
					l += ev.Loss.Count
				case event.KindCapabilities: // not a record of the storm
				default:
					got++
				}
			}
			done <- [2]uint64{got, l}
		}()
		settle()
		warm = 200
		cpu := collectorCPU()
		d, err := collectorStorm(b, cg, per)
		if err != nil {
			b.Fatal(err)
		}
		// Close (about 50 ms: detach, drain, unload) is not part of the
		// storm; the consumer's work is.
		cpu = collectorCPU() - cpu
		c.Close()
		r := <-done
		received += r[0]
		lost += r[1]
		if r[0]+r[1] != uint64(3*(per+warm)) {
			b.Errorf("collector: received %d + lost %d, want %d (exec, fork and exit of each)", r[0], r[1], 3*(per+warm))
		}
		coll.add(d, cpu)
	}
	runAuditd := func() {
		if auditdReason != "" {
			return
		}
		a, err := collectorStartAuditd()
		if err != nil {
			auditdReason = err.Error()
			return
		}
		settle()
		cpu := collectorCPU()
		d, err := collectorStorm(b, cg, per)
		auditLost += a.lost()
		if serr := a.stop(); serr != nil {
			b.Error(serr)
		}
		if err != nil {
			b.Fatal(err)
		}
		audit.add(d, collectorCPU()-cpu)
	}
	orders := [][]func(){
		{runBase, runCollector, runAuditd},
		{runCollector, runAuditd, runBase},
		{runAuditd, runBase, runCollector},
	}
	b.ResetTimer()
	for i := range k * b.N {
		for _, f := range orders[i%3] {
			f()
		}
	}
	b.StopTimer()

	// One more storm with the kernel's BPF statistics on, which cost a
	// little themselves, for the time spent in the BPF programs.
	if stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME); err != nil {
		b.Logf("BPF statistics not available: %v", err)
	} else {
		c, err := collector.New(nil, collector.WithQueueSize(1<<16))
		if err != nil {
			b.Fatalf("collector.New() = %v", err)
		}
		if err := c.Watch(cgid, "bench"); err != nil {
			b.Fatal(err)
		}
		go func() {
			for range c.Events() {
			}
		}()
		if _, err := collectorStorm(b, cg, n); err != nil {
			b.Fatal(err)
		}
		c.Close()
		stats.Close()
		s := c.Stats()
		b.ReportMetric(float64(s.BPFRunTime.Nanoseconds())/float64(n), "bpf-ns/exec")
		b.Logf("BPF programs: %d runs, %v, %.0f ns per run; misses %d", s.BPFRuns, s.BPFRunTime,
			float64(s.BPFRunTime.Nanoseconds())/float64(max(s.BPFRuns, 1)), s.BPFMisses)
	}

	nsPer := func(ds []time.Duration) float64 {
		return float64(collectorSum(ds).Nanoseconds()) / float64(len(ds)*per)
	}
	b.ReportMetric(nsPer(base.wall), "ns/exec-none")
	b.ReportMetric(nsPer(coll.wall), "ns/exec-sandtrail")
	b.ReportMetric(collectorRatio(coll.wall, base.wall), "x-sandtrail-wall")
	collectorSpread(b, coll.wall, base.wall)
	b.ReportMetric(collectorRatio(coll.cpu, base.cpu), "x-sandtrail-cpu")
	b.ReportMetric(float64(lost), "events-lost")
	b.Logf("%d execs per configuration in %d slices of %d; events received %d, lost %d", len(base.wall)*per, len(base.wall), per, received, lost)
	b.Logf("totals: wall none %v sandtrail %v auditd %v; cpu none %v sandtrail %v auditd %v",
		collectorSum(base.wall), collectorSum(coll.wall), collectorSum(audit.wall),
		collectorSum(base.cpu), collectorSum(coll.cpu), collectorSum(audit.cpu))
	b.Logf("wall ms: none %v sandtrail %v auditd %v", collectorMs(base.wall), collectorMs(coll.wall), collectorMs(audit.wall))
	b.Logf("cpu ms:  none %v sandtrail %v auditd %v", collectorMs(base.cpu), collectorMs(coll.cpu), collectorMs(audit.cpu))
	if len(audit.wall) == 0 {
		b.Logf("auditd not measured: %s", auditdReason)
		return
	}
	b.ReportMetric(nsPer(audit.wall), "ns/exec-auditd")
	xaw, xac := collectorRatio(audit.wall, base.wall), collectorRatio(audit.cpu, base.cpu)
	b.ReportMetric(xaw, "x-auditd-wall")
	b.ReportMetric(xac, "x-auditd-cpu")
	b.ReportMetric((collectorRatio(coll.wall, base.wall)-1)/(xaw-1), "overhead-vs-auditd-wall")
	b.ReportMetric((collectorRatio(coll.cpu, base.cpu)-1)/(xac-1), "overhead-vs-auditd-cpu")
	b.Logf("auditd: kernel lost %d audit records", auditLost)
}

func collectorMs(ds []time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Milliseconds()
	}
	return out
}
