package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
)

// sysLoopEnv, when set in the environment, makes the test binary run one
// loop of syscalls (TestMain calls sysLoop) instead of the benchmarks; its
// value is the loop's kind.
const sysLoopEnv = "SANDTRAIL_BENCH_SYSLOOP"

// sysKinds are the loops of BenchmarkCollectorSyscalls and their lengths.
var sysKinds = []struct {
	name string
	n    int
}{
	// A syscall that nothing traces: what every syscall of every task
	// pays while any syscall tracepoint is attached.
	{"getppid", 1_000_000},
	// openat + close of a file seven components deep beneath the
	// session's home: a traced open that is a non-sensitive read (the
	// decision walk, no record).
	{"open", 200_000},
	// fchmodat of the same file by absolute path: a traced syscall that is
	// recorded.
	{"chmod", 200_000},
}

// sysLoop runs in the helper: os.Args[1] iterations of the loop named by
// sysLoopEnv on the file os.Args[2], on one thread with raw syscalls (no
// Go scheduler hooks), and prints the nanoseconds per iteration.
func sysLoop() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n <= 0 || len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: iterations file")
		os.Exit(2)
	}
	p, err := unix.BytePtrFromString(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	path := uintptr(unsafe.Pointer(p))
	cwd := unix.AT_FDCWD
	runtime.LockOSThread()
	start := time.Now()
	switch kind := os.Getenv(sysLoopEnv); kind {
	case "getppid":
		for range n {
			unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
		}
	case "open":
		for range n {
			fd, _, errno := unix.RawSyscall6(unix.SYS_OPENAT, uintptr(cwd), path, unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
			if errno != 0 {
				fmt.Fprintln(os.Stderr, "openat:", errno)
				os.Exit(1)
			}
			unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
		}
	case "chmod":
		for range n {
			if _, _, errno := unix.RawSyscall6(unix.SYS_FCHMODAT, uintptr(cwd), path, 0o644, 0, 0, 0); errno != 0 {
				fmt.Fprintln(os.Stderr, "fchmodat:", errno)
				os.Exit(1)
			}
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown loop %q\n", kind)
		os.Exit(2)
	}
	fmt.Println(float64(time.Since(start).Nanoseconds()) / float64(n))
	os.Exit(0)
}

// BenchmarkCollectorSyscalls measures the cost of the collector's syscall
// tracepoints per syscall, the floor beneath the file-heavy benchmark: a
// helper (this test binary started again) in the test cgroup makes one kind
// of syscall in a loop (sysKinds) and reports the time per iteration, in
// pairs of runs without the collector and with it (every part loaded, as in
// the files benchmark), adjacent and alternating which goes first. Reported
// per kind: the medians of none and sandtrail (ns/op) and the median of the
// per-pair differences (the nanoseconds the collector adds).
func BenchmarkCollectorSyscalls(b *testing.B) {
	ioRequireRoot(b)
	cg := cgrouptest.New(b)
	home := filepath.Join(ioFilesDir(b), "home")
	file := filepath.Join(home, "work", "a", "b", "c", "d", "file")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("data\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	loop := func(kind string, n int) float64 {
		b.Helper()
		cmd := exec.Command(exe, strconv.Itoa(n), file)
		cmd.Env = append(os.Environ(), sysLoopEnv+"="+kind)
		cmd.SysProcAttr = cg.SysProcAttr(b, -1)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("%s loop: %v: %s", kind, err, stderr.String())
		}
		ns, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			b.Fatalf("%s loop printed %q: %v", kind, out, err)
		}
		return ns
	}
	none := make(map[string][]float64)
	coll := make(map[string][]float64)
	all := func(into map[string][]float64) {
		for _, k := range sysKinds {
			into[k.name] = append(into[k.name], loop(k.name, k.n))
		}
	}
	var got ioCount
	b.ResetTimer()
	ioAlternate(ioPairs(5)*b.N, func() {
		ioSettle(b, cg)
		all(none)
	}, func() {
		ic := ioStartCollector(b, cg.ID, home)
		ioSettle(b, cg)
		all(coll)
		got.add(ic.close())
	})
	b.StopTimer()
	for _, k := range sysKinds {
		n, c := none[k.name], coll[k.name]
		diff := make([]float64, len(n))
		for i := range n {
			diff[i] = c[i] - n[i]
		}
		b.ReportMetric(median(n), k.name+"-ns-none")
		b.ReportMetric(median(c), k.name+"-ns-sandtrail")
		b.ReportMetric(median(diff), k.name+"-ns-added")
		b.Logf("%s ns per iteration: none %.0f, sandtrail %.0f", k.name, n, c)
	}
	b.ReportMetric(float64(got.lost), "events-lost")
	b.Logf("collector received %s", got)
}
