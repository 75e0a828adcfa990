package bench

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/collector"
	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
)

// The file-heavy and loopback HTTP benchmarks run a real workload in a test
// cgroup twice per pair, once with no collector and once with the sandtrail
// collector (every part that collector.New loads) watching the cgroup. The
// two runs of a pair are adjacent and their order alternates (AB BA AB …),
// so the machine's drift falls on both; the ratios reported are medians of
// the per-pair ratios (collectorRatio), as in the exec storm.

// ioPairs is the number of (none, sandtrail) pairs per benchmark iteration,
// def unless SANDTRAIL_BENCH_PAIRS overrides it.
func ioPairs(def int) int {
	if n, err := strconv.Atoi(os.Getenv("SANDTRAIL_BENCH_PAIRS")); err == nil && n > 0 {
		return n
	}
	return def
}

// ioAlternate runs pairs pairs of base and coll, adjacent, alternating which
// goes first (AB BA AB …) so that a drift of the machine weighs on both.
func ioAlternate(pairs int, base, coll func()) {
	for i := range pairs {
		if i%2 == 0 {
			base()
			coll()
		} else {
			coll()
			base()
		}
	}
}

// ioRequireRoot skips b unless it runs as root: loading the collector and
// making cgroups need it.
func ioRequireRoot(b *testing.B) {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("skipping: the collector and the test cgroup need root")
	}
}

// ioPolicy compiles the default policy (policies/default.yaml).
func ioPolicy(b *testing.B) *policies.Engine {
	b.Helper()
	eng, err := policies.New(policies.Default())
	if err != nil {
		b.Fatalf("compiling the default policy: %v", err)
	}
	return eng
}

// ioCount is what the consumer of one collector received.
type ioCount struct {
	events, lost uint64
	kinds        map[string]uint64
}

func (n *ioCount) add(m ioCount) {
	n.events += m.events
	n.lost += m.lost
	if n.kinds == nil {
		n.kinds = map[string]uint64{}
	}
	for k, v := range m.kinds {
		n.kinds[k] += v
	}
}

// String lists the kinds received, most frequent first.
func (n ioCount) String() string {
	kinds := slices.Collect(func(yield func(string) bool) {
		for k := range n.kinds {
			if !yield(k) {
				return
			}
		}
	})
	slices.SortFunc(kinds, func(a, b string) int { return cmp.Or(cmp.Compare(n.kinds[b], n.kinds[a]), cmp.Compare(a, b)) })
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d events, %d lost", n.events, n.lost)
	for _, k := range kinds {
		fmt.Fprintf(&sb, "; %s %d", k, n.kinds[k])
	}
	return sb.String()
}

// ioCollector is the "on" arm's collector, watching one cgroup, with a
// consumer that counts what it receives.
type ioCollector struct {
	c    *collector.Collector
	done chan ioCount
}

// ioStartCollector loads the collector, watches cgid and starts consuming.
// It configures the collector as the daemon does (cmd/sandtrail/host.go)
// under the default policy: egress enforced in the kernel, reads recorded
// beneath the policy's sensitive paths, host-wide and, when home is not
// empty, beneath the session's home (~/.ssh, ~/.aws, …); and a queue big
// enough for bursts.
func ioStartCollector(b *testing.B, cgid uint64, home string) *ioCollector {
	b.Helper()
	pol := ioPolicy(b)
	c, err := collector.New(nil, collector.WithQueueSize(1<<16), collector.WithEgress(pol),
		collector.WithSensitiveReads(pol.SensitiveReads("")))
	if err != nil {
		b.Fatalf("collector.New() = %v", err)
	}
	if err := c.Watch(cgid, "bench"); err != nil {
		c.Close()
		b.Fatal(err)
	}
	if home != "" {
		sens, exc := pol.SensitiveReads(home)
		if err := c.AddSensitive(cgid, sens, exc); err != nil {
			c.Close()
			b.Fatal(err)
		}
	}
	ic := &ioCollector{c: c, done: make(chan ioCount, 1)}
	go func() {
		n := ioCount{kinds: map[string]uint64{}}
		for ev := range c.Events() {
			if ev.Kind == event.KindLoss {
				n.lost += ev.Loss.Count
				continue
			}
			if ev.Kind == event.KindCapabilities {
				continue // not a record of the workload
			}
			n.events++
			n.kinds[ev.Kind]++
		}
		ic.done <- n
	}()
	return ic
}

// close closes the collector (detach, drain, unload: not part of a timed
// run) and returns what the consumer received.
func (ic *ioCollector) close() ioCount {
	ic.c.Close()
	return <-ic.done
}

// ioSettle lets the previous configuration's teardown finish in the kernel
// and a new collector reach its steady state before a timed run, as the exec
// storm's settle does: 300 ms, then an untimed 200-exec storm in cg.
func ioSettle(b *testing.B, cg *cgrouptest.Cgroup) {
	b.Helper()
	time.Sleep(300 * time.Millisecond)
	if err := cg.ExecStorm(b, 200, 2); err != nil {
		b.Fatal(err)
	}
}

// ioChildCPU is the user + system time of a waited-for child and of the
// descendants it waited for.
func ioChildCPU(ps *os.ProcessState) time.Duration {
	return ps.UserTime() + ps.SystemTime()
}

// ioProgram is one of the collector's loaded BPF programs.
type ioProgram struct {
	name string
	p    *ebpf.Program
}

// ioLastProgramID returns the highest BPF program id loaded now.
func ioLastProgramID() ebpf.ProgramID {
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			return id
		}
		id = next
	}
}

// ioProgramsAfter opens the BPF programs loaded with an id above after that
// belong to the collector watching cgid: those that use its "watched" map
// (the one holding cgid) or its "events" ring buffer, not those of another
// process's collector loaded at the same moment.
func ioProgramsAfter(after ebpf.ProgramID, cgid uint64) []ioProgram {
	type cand struct {
		ioProgram
		maps []ebpf.MapID
	}
	var cands []cand
	for id := after; ; {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			break
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		info, err := p.Info()
		if err != nil {
			p.Close()
			continue
		}
		maps, _ := info.MapIDs()
		cands = append(cands, cand{ioProgram{info.Name, p}, maps})
	}
	// own holds the ids of the collector's watched and events maps.
	own := map[ebpf.MapID]bool{}
	names := map[ebpf.MapID]string{}
	for _, c := range cands {
		for _, id := range c.maps {
			if _, seen := names[id]; seen {
				continue
			}
			m, err := ebpf.NewMapFromID(id)
			if err != nil {
				names[id] = ""
				continue
			}
			info, err := m.Info()
			if err == nil {
				names[id] = info.Name
				if info.Name == "watched" {
					if v, err := m.LookupBytes(cgid); err == nil && v != nil {
						own[id] = true
					}
				}
			}
			m.Close()
		}
	}
	for _, c := range cands {
		if slices.ContainsFunc(c.maps, func(id ebpf.MapID) bool { return own[id] }) {
			for _, id := range c.maps {
				if names[id] == "events" {
					own[id] = true
				}
			}
		}
	}
	var ps []ioProgram
	for _, c := range cands {
		if slices.ContainsFunc(c.maps, func(id ebpf.MapID) bool { return own[id] }) {
			ps = append(ps, c.ioProgram)
		} else {
			c.p.Close()
		}
	}
	return ps
}

// ioProfile runs work (which returns how many ops it did) once more, with
// the kernel's BPF statistics on (which cost a little themselves) and a
// collector watching cg (with home, as in ioStartCollector), and reports the time spent in the collector's BPF
// programs per op (bpf-ns/<unit>); it logs each program's share
// (ioProgramsAfter finds them; the log says when their sum differs from the
// collector's own Stats).
func ioProfile(b *testing.B, cg *cgrouptest.Cgroup, home, unit string, work func() (ops float64)) {
	b.Helper()
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Logf("BPF statistics not available: %v", err)
		return
	}
	defer stats.Close()
	last := ioLastProgramID()
	ic := ioStartCollector(b, cg.ID, home)
	progs := ioProgramsAfter(last, cg.ID)
	defer func() {
		for _, p := range progs {
			p.p.Close()
		}
	}()
	ioSettle(b, cg)
	read := func() []ebpf.ProgramStats {
		out := make([]ebpf.ProgramStats, len(progs))
		for i, p := range progs {
			if s, err := p.p.Stats(); err == nil {
				out[i] = *s
			}
		}
		return out
	}
	s0, p0 := ic.c.Stats(), read()
	ops := work()
	s1, p1 := ic.c.Stats(), read()
	n := ic.close()

	total := s1.BPFRunTime - s0.BPFRunTime
	b.ReportMetric(float64(total.Nanoseconds())/ops, "bpf-ns/"+unit)
	b.Logf("BPF programs (profile run, %s): %d runs, %v, %.0f ns per %s; misses %d",
		n, s1.BPFRuns-s0.BPFRuns, total, float64(total.Nanoseconds())/ops, unit, s1.BPFMisses-s0.BPFMisses)
	type row struct {
		name string
		runs uint64
		t    time.Duration
	}
	var rows []row
	var sum time.Duration
	for i, p := range progs {
		r := row{p.name, p1[i].RunCount - p0[i].RunCount, p1[i].Runtime - p0[i].Runtime}
		if r.runs == 0 {
			continue
		}
		sum += r.t
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(b.t, a.t) })
	var sb strings.Builder
	for i, r := range rows {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s %d × %.0f ns = %.0f ns/%s", r.name, r.runs,
			float64(r.t.Nanoseconds())/float64(r.runs), float64(r.t.Nanoseconds())/ops, unit)
	}
	b.Logf("BPF per program: %s", &sb)
	if d := sum - total; d > total/100 || -d > total/100 {
		b.Logf("(the programs listed sum to %v, the collector's Stats to %v)", sum, total)
	}
}

// ioTreeVersion is the version of the generated file tree; change it when
// ioTree changes.
const ioTreeVersion = 2

// The generated tree, extracted into a session's home: project/ with 20
// packages of 10 modules of 10 directories of 10 files (20,000 files in
// 2,221 directories), and .ssh/ with 10 directories of 10 files, the part
// beneath a sensitive path of the default policy (~/.ssh).
const (
	ioTreePackages, ioTreeModules, ioTreeDirs, ioTreeFiles = 20, 10, 10, 10
	ioTreeSecretDirs                                       = 10
	ioTreeProject, ioTreeSecrets                           = "project", ".ssh"
)

// ioTree returns the path of the tarball of the file-heavy workload,
// generating it the first time and caching it under results/. File sizes are
// mixed, like a source tree or node_modules: 70% of 64 B–2 KiB, 25% of
// 2–16 KiB, 5% of 16–64 KiB (about 100 MB in all). It also returns the
// number of regular files.
func ioTree(b *testing.B) (string, int) {
	b.Helper()
	files := (ioTreePackages*ioTreeModules*ioTreeDirs + ioTreeSecretDirs) * ioTreeFiles
	dir := "results"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("files-tree-%d-v%d.tar", files, ioTreeVersion))
	if _, err := os.Stat(path); err == nil {
		return path, files
	}
	tmp := path + ".building"
	f, err := os.Create(tmp)
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(tmp)
	bw := bufio.NewWriterSize(f, 1<<20)
	tw := tar.NewWriter(bw)
	rnd := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 \n{}();=."
	content := make([]byte, 64<<10)
	for i := range content {
		content[i] = alphabet[rnd.IntN(len(alphabet))]
	}
	mtime := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	mkdir := func(name string) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: mtime}); err != nil {
			b.Fatal(err)
		}
	}
	var total int64
	addFiles := func(dir string) {
		mkdir(dir)
		for i := range ioTreeFiles {
			var size int
			switch p := rnd.IntN(100); {
			case p < 70:
				size = 64 + rnd.IntN(2048-64)
			case p < 95:
				size = 2048 + rnd.IntN(14<<10)
			default:
				size = 16<<10 + rnd.IntN(48<<10)
			}
			off := rnd.IntN(len(content) - size + 1)
			h := &tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("%s/f%d.txt", dir, i), Mode: 0o644, Size: int64(size), ModTime: mtime}
			if err := tw.WriteHeader(h); err != nil {
				b.Fatal(err)
			}
			if _, err := tw.Write(content[off : off+size]); err != nil {
				b.Fatal(err)
			}
			total += int64(size)
		}
	}
	mkdir(ioTreeProject)
	for p := range ioTreePackages {
		mkdir(fmt.Sprintf("%s/pkg%02d", ioTreeProject, p))
		for m := range ioTreeModules {
			mkdir(fmt.Sprintf("%s/pkg%02d/mod%d", ioTreeProject, p, m))
			for d := range ioTreeDirs {
				addFiles(fmt.Sprintf("%s/pkg%02d/mod%d/d%d", ioTreeProject, p, m, d))
			}
		}
	}
	mkdir(ioTreeSecrets)
	for d := range ioTreeSecretDirs {
		addFiles(fmt.Sprintf("%s/s%d", ioTreeSecrets, d))
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	b.Logf("built %s: %d files, %d MB", path, files, total>>20)
	return path, files
}

// ioFilesDir makes the directory the file workload runs in, beneath
// SANDTRAIL_BENCH_FILES_DIR, by default /dev/shm (tmpfs), and removes it
// when b ends. tmpfs by default: on the ext4 of the project's VMs a file
// create costs 0.6–0.8 ms of CPU (50× tmpfs) and varies 3× with the
// directory's place on the disk, which would drown the collector's cost;
// on tmpfs that cost is the largest share it can be, the worst case for the
// ratio.
func ioFilesDir(b *testing.B) string {
	b.Helper()
	parent := cmp.Or(os.Getenv("SANDTRAIL_BENCH_FILES_DIR"), "/dev/shm")
	dir, err := os.MkdirTemp(parent, "sandtrail-bench-files-")
	if err != nil {
		b.Fatalf("making the file workload's directory: %v", err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// ioFilesWorkloads are the file-heavy workloads: each a script run by sh in
// the home directory $2 with the tarball $1, timed, and a cleanup run after
// it, untimed and outside the cgroup.
var ioFilesWorkloads = []struct{ name, script, cleanup string }{
	// The issue's own: untar a large tree and walk it (du stats every
	// entry). Per file: a create and tar's fchmod are traced.
	{"untar-walk", `set -e
cd "$2"
tar -xf "$1"
du -s . >/dev/null
`, "rm -rf " + ioTreeProject + " " + ioTreeSecrets},
	// And every file read (find + cat) and deleted (rm -rf) too, timed:
	// four traced syscalls per file instead of two, the worst case.
	{"untar-walk-read-rm", `set -e
cd "$2"
tar -xf "$1"
du -s . >/dev/null
find . -type f -exec cat {} + >/dev/null
rm -rf ` + ioTreeProject + " " + ioTreeSecrets + "\n", ""},
}

// BenchmarkCollectorFiles runs the file-heavy workloads (ioFilesWorkloads)
// in a test cgroup, with no collector and with the sandtrail collector
// watching the cgroup, interleaved: a 20,100-file tarball (2,232
// directories, 98 MB, generated once into results/) extracted into a
// session's home on tmpfs (100 of the files in ~/.ssh, whose reads the
// default policy records), then walked with du, and in the second workload
// every file read with find -exec cat and removed with rm -rf. It reports
// the medians of the per-pair ratios of wall time, of the CPU time of this
// process (driver, collector, consumer) and its children (x-sandtrail-cpu),
// and of the workload's own CPU time, in which the BPF programs run
// (x-sandtrail-child-cpu); then one more run with BPF statistics on for the
// time spent in the programs, per file.
func BenchmarkCollectorFiles(b *testing.B) {
	tarball, files, cg, home := ioFilesSetup(b)
	for _, w := range ioFilesWorkloads {
		b.Run(w.name, func(b *testing.B) {
			ioFiles(b, cg, tarball, home, files, w.script, w.cleanup)
		})
	}
}

// ioFiles is one workload of BenchmarkCollectorFiles.
func ioFiles(b *testing.B, cg *cgrouptest.Cgroup, tarball, home string, files int, script, cleanup string) {
	// run runs the workload once in cg and returns its wall and CPU time,
	// and the CPU time of this process and all its waited-for children.
	run := func() (wall, child, cpu time.Duration) {
		b.Helper()
		cmd := exec.Command("/bin/sh", "-c", script, "sh", tarball, home)
		cmd.SysProcAttr = cg.SysProcAttr(b, -1)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cpu0, start := collectorCPU(), time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("file workload: %v: %s", err, stderr.Bytes())
		}
		return time.Since(start), ioChildCPU(cmd.ProcessState), collectorCPU() - cpu0
	}
	// clean runs the cleanup, outside the cgroup, after the collector of
	// a run is closed.
	clean := func() {
		b.Helper()
		if cleanup == "" {
			return
		}
		c := exec.Command("/bin/sh", "-c", cleanup)
		c.Dir = home
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("cleaning up after the file workload: %v: %s", err, out)
		}
	}
	run() // warm up: the page cache holds the tarball from here on
	clean()

	var base, coll collectorRuns
	var baseChild, collChild []time.Duration
	var got ioCount
	runBase := func() {
		ioSettle(b, cg)
		wall, child, cpu := run()
		clean()
		base.add(wall, cpu)
		baseChild = append(baseChild, child)
	}
	runCollector := func() {
		ic := ioStartCollector(b, cg.ID, home)
		ioSettle(b, cg)
		wall, child, cpu := run()
		got.add(ic.close())
		clean()
		coll.add(wall, cpu)
		collChild = append(collChild, child)
	}
	b.ResetTimer()
	ioAlternate(ioPairs(5)*b.N, runBase, runCollector)
	b.StopTimer()

	ioProfile(b, cg, home, "file", func() float64 { run(); return float64(files) })
	clean()

	msPer := func(ds []time.Duration) float64 { return float64(collectorSum(ds).Milliseconds()) / float64(len(ds)) }
	b.ReportMetric(msPer(base.wall), "ms/run-none")
	b.ReportMetric(msPer(coll.wall), "ms/run-sandtrail")
	b.ReportMetric(collectorRatio(coll.wall, base.wall), "x-sandtrail-wall")
	collectorSpread(b, coll.wall, base.wall)
	b.ReportMetric(collectorRatio(coll.cpu, base.cpu), "x-sandtrail-cpu")
	b.ReportMetric(collectorRatio(collChild, baseChild), "x-sandtrail-child-cpu")
	b.ReportMetric(float64(got.lost), "events-lost")
	b.Logf("%d runs per configuration of %d files; collector received %s", len(base.wall), files, got)
	b.Logf("ms: wall none %v sandtrail %v; cpu none %v sandtrail %v; child cpu none %v sandtrail %v",
		collectorMs(base.wall), collectorMs(coll.wall), collectorMs(base.cpu), collectorMs(coll.cpu),
		collectorMs(baseChild), collectorMs(collChild))
}

// ioHTTPBody is the server's response body: a small API response.
var ioHTTPBody = bytes.Repeat([]byte("sandtrail "), 52)[:512]

// ioServeEnv, when set in the environment, makes the test binary an HTTP
// server (TestMain calls ioServe) instead of running benchmarks.
const ioServeEnv = "SANDTRAIL_BENCH_HTTP_SERVE"

// ioServe serves ioHTTPBody on 127.0.0.1, printing the address on stdout,
// until stdin is closed.
func ioServe() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Write(ioHTTPBody)
		}),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go srv.Serve(ln)
	fmt.Println(ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// ioHTTPServer is the HTTP server of the loopback benchmark: this test
// binary in another process (ioServe), outside the test cgroup, so that the
// collector's goroutines and garbage collection (in this process) do not
// run inside the server, as they would not in production, where the daemon
// and the agent's peers are different processes.
type ioHTTPServer struct {
	url string
	pid int
}

// ioStartHTTPServer starts the server and stops it when b ends.
func ioStartHTTPServer(b *testing.B) *ioHTTPServer {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), ioServeEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting the HTTP server: %v", err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("reading the HTTP server's address: %v", err)
	}
	return &ioHTTPServer{url: "http://" + strings.TrimSpace(addr) + "/", pid: cmd.Process.Pid}
}

// cpu returns the CPU time the server's threads have used, from
// /proc/<pid>/task/*/schedstat (nanoseconds on a CPU, the first field).
func (s *ioHTTPServer) cpu() time.Duration {
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", s.pid))
	var sum time.Duration
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var ns int64
		if _, err := fmt.Sscan(string(b), &ns); err == nil {
			sum += time.Duration(ns)
		}
	}
	return sum
}

// ioWrkDuration is the length of one wrk run; SANDTRAIL_BENCH_WRK_DURATION
// overrides it.
func ioWrkDuration() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SANDTRAIL_BENCH_WRK_DURATION")); err == nil && d >= time.Second {
		return d
	}
	return 5 * time.Second
}

// ioWrkResult is what one wrk run reports.
type ioWrkResult struct {
	requests     int64
	rps          float64
	socketErrors int64
	non2xx       int64
}

var (
	ioWrkRequests = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	ioWrkRPS      = regexp.MustCompile(`(?m)^Requests/sec:\s*([0-9.]+)`)
	ioWrkSockErrs = regexp.MustCompile(`(?m)^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	ioWrkNon2xx   = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses: (\d+)`)
)

// ioParseWrk parses wrk's summary.
func ioParseWrk(out []byte) (ioWrkResult, error) {
	var r ioWrkResult
	m := ioWrkRequests.FindSubmatch(out)
	n := ioWrkRPS.FindSubmatch(out)
	if m == nil || n == nil {
		return r, fmt.Errorf("parsing wrk output: no request count or rate in %q", out)
	}
	r.requests, _ = strconv.ParseInt(string(m[1]), 10, 64)
	r.rps, _ = strconv.ParseFloat(string(n[1]), 64)
	if m := ioWrkSockErrs.FindSubmatch(out); m != nil {
		for _, s := range m[1:] {
			v, _ := strconv.ParseInt(string(s), 10, 64)
			r.socketErrors += v
		}
	}
	if m := ioWrkNon2xx.FindSubmatch(out); m != nil {
		r.non2xx, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if r.requests <= 0 || r.rps <= 0 {
		return r, fmt.Errorf("parsing wrk output: %d requests at %g/s in %q", r.requests, r.rps, out)
	}
	return r, nil
}

// BenchmarkCollectorHTTP runs wrk (-t2 -c32, 5 s) in a test cgroup against
// a net/http server on 127.0.0.1 outside it, with no collector and with the
// sandtrail collector watching the cgroup, interleaved; the server shares
// the 2 cores. keepalive reuses 32 connections; close sends
// "Connection: close", so every request is a new connection, where the
// per-connection hooks cost most. It reports the requests per second of
// each and the medians of the per-pair ratios of the time per request
// (x-sandtrail-wall, none's rate over sandtrail's) and of the CPU time per
// request of this process (server, collector, consumer) and wrk
// (x-sandtrail-cpu); then one more run with BPF statistics on for the time
// spent in the programs, per request.
func BenchmarkCollectorHTTP(b *testing.B) {
	ioRequireRoot(b)
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Skip("skipping: wrk is not installed (scripts/deps.sh bench)")
	}
	srv := ioStartHTTPServer(b)
	cg := cgrouptest.New(b)
	dur := ioWrkDuration()
	for _, v := range []struct {
		name  string
		extra []string
	}{
		{"keepalive", nil},
		{"close", []string{"-H", "Connection: close"}},
	} {
		b.Run(v.name, func(b *testing.B) {
			args := append([]string{"-t2", "-c32", "-d" + dur.String(), "--timeout", "10s"}, v.extra...)
			args = append(args, srv.url)
			// run runs wrk once in cg and returns its result and the
			// CPU time of this process, its waited-for children (wrk)
			// and the server.
			run := func() (ioWrkResult, time.Duration) {
				b.Helper()
				cmd := exec.Command(wrk, args...)
				cmd.SysProcAttr = cg.SysProcAttr(b, -1)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				cpu0 := collectorCPU() + srv.cpu()
				out, err := cmd.Output()
				cpu := collectorCPU() + srv.cpu() - cpu0
				if err != nil {
					b.Fatalf("wrk %s: %v: %s%s", strings.Join(args, " "), err, out, stderr.Bytes())
				}
				r, err := ioParseWrk(out)
				if err != nil {
					b.Fatal(err)
				}
				if r.non2xx > 0 {
					b.Fatalf("wrk: %d responses were not 2xx or 3xx:\n%s", r.non2xx, out)
				}
				return r, cpu
			}
			// perRequest turns a run into the time and the CPU time per
			// request, the quantities whose ratios are reported.
			perRequest := func(r ioWrkResult, cpu time.Duration) (time.Duration, time.Duration) {
				return time.Duration(float64(time.Second) / r.rps), cpu / time.Duration(r.requests)
			}
			var base, coll collectorRuns
			var baseRPS, collRPS []float64
			var sockErrs int64
			var got ioCount
			runBase := func() {
				ioSettle(b, cg)
				r, cpu := run()
				base.add(perRequest(r, cpu))
				baseRPS = append(baseRPS, r.rps)
				sockErrs += r.socketErrors
			}
			runCollector := func() {
				ic := ioStartCollector(b, cg.ID, "")
				ioSettle(b, cg)
				r, cpu := run()
				got.add(ic.close())
				coll.add(perRequest(r, cpu))
				collRPS = append(collRPS, r.rps)
				sockErrs += r.socketErrors
			}
			b.ResetTimer()
			ioAlternate(ioPairs(3)*b.N, runBase, runCollector)
			b.StopTimer()

			ioProfile(b, cg, "", "request", func() float64 { r, _ := run(); return float64(r.requests) })

			b.ReportMetric(median(baseRPS), "rps-none")
			b.ReportMetric(median(collRPS), "rps-sandtrail")
			b.ReportMetric(collectorRatio(coll.wall, base.wall), "x-sandtrail-wall")
			collectorSpread(b, coll.wall, base.wall)
			b.ReportMetric(collectorRatio(coll.cpu, base.cpu), "x-sandtrail-cpu")
			b.ReportMetric(float64(got.lost), "events-lost")
			b.ReportMetric(float64(sockErrs), "socket-errors")
			b.Logf("%d runs per configuration; collector received %s", len(base.wall), got)
			b.Logf("requests/s: none %.0f sandtrail %.0f; cpu µs/request: none %v sandtrail %v",
				baseRPS, collRPS, ioMicros(base.cpu), ioMicros(coll.cpu))
		})
	}
}

// ioMicros rounds durations to microseconds with one decimal, for logs.
func ioMicros(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d.Nanoseconds()/100) / 10
	}
	return out
}

// TestParseWrk checks the parser on wrk 4.1's summaries.
func TestParseWrk(t *testing.T) {
	const clean = `Running 5s test @ http://127.0.0.1:40000/
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.02ms    1.30ms  24.57ms   89.13%
    Req/Sec    17.95k     2.10k   22.06k    70.00%
  178634 requests in 5.00s, 109.71MB read
Requests/sec:  35726.51
Transfer/sec:     21.94MB
`
	const errs = `Running 5s test @ http://127.0.0.1:40000/
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.02ms    2.30ms  44.57ms   79.13%
    Req/Sec     7.95k     1.10k   9.06k    60.00%
  76512 requests in 5.00s, 46.99MB read
  Socket errors: connect 0, read 12, write 1, timeout 3
  Non-2xx or 3xx responses: 7
Requests/sec:  15302.40
Transfer/sec:      9.40MB
`
	for _, tc := range []struct {
		name string
		out  string
		want ioWrkResult
		err  bool
	}{
		{name: "clean", out: clean, want: ioWrkResult{requests: 178634, rps: 35726.51}},
		{name: "errors", out: errs, want: ioWrkResult{requests: 76512, rps: 15302.40, socketErrors: 16, non2xx: 7}},
		{name: "no summary", out: "unable to connect to 127.0.0.1:1 Connection refused\n", err: true},
		{name: "zero requests", out: "  0 requests in 5.00s, 0B read\nRequests/sec:      0.00\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ioParseWrk([]byte(tc.out))
			if (err != nil) != tc.err {
				t.Fatalf("ioParseWrk() error = %v, want error %v", err, tc.err)
			}
			if !tc.err && got != tc.want {
				t.Errorf("ioParseWrk() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// ioFilesSetup is what the file workloads need, as root: the tools (the
// workloads' and extra), the tree's tarball (its absolute path) and its
// file count, a cgroup of the benchmark's own, and a home directory.
func ioFilesSetup(b *testing.B, extra ...string) (tarball string, files int, cg *cgrouptest.Cgroup, home string) {
	ioRequireRoot(b)
	for _, tool := range append([]string{"sh", "tar", "du", "find", "cat", "rm"}, extra...) {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("skipping: %s is not installed (scripts/deps.sh bench)", tool)
		}
	}
	tarball, files = ioTree(b)
	tarball, err := filepath.Abs(tarball)
	if err != nil {
		b.Fatal(err)
	}
	cg = cgrouptest.New(b)
	home = filepath.Join(ioFilesDir(b), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		b.Fatal(err)
	}
	return tarball, files, cg, home
}
