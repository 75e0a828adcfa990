package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
)

// BenchmarkRunJournalSize measures `sandtrail run -- true` over a journal
// of 10^6 entries against one of 10^3, alternating, in the same run: the
// run's summary verifies only from the newest checkpoint before the
// session (journal.VerifyFrom), so its time should not grow with the
// journal (target: the ratio under 1.10). It reports the medians, the
// ratio, and what a full verify of the large journal costs, the cost the
// summary no longer pays.
func BenchmarkRunJournalSize(b *testing.B) {
	bin, dir := runSetup(b)
	small, large := runData(b, bin, dir, "small", 1_000), runData(b, bin, dir, "large", 1_000_000)
	var ds, dl []time.Duration
	b.ResetTimer()
	for range b.N {
		for range 5 {
			ds = append(ds, runTrue(b, bin, small, hostedHere, 1_000))
			dl = append(dl, runTrue(b, bin, large, hostedHere, 1_000_000))
		}
	}
	b.StopTimer()
	s, l := medianDuration(ds), medianDuration(dl)
	b.ReportMetric(float64(s.Microseconds())/1000, "small-ms")
	b.ReportMetric(float64(l.Microseconds())/1000, "large-ms")
	b.ReportMetric(float64(l)/float64(s), "ratio")
	start := time.Now()
	if out, err := exec.Command(bin, "--data", large, "verify").CombinedOutput(); err != nil {
		b.Fatalf("sandtrail verify: %v\n%s", err, out)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "full-verify-ms")
}

// runData makes a data dir whose journal holds at least n entries: one
// `sandtrail run -- true` creates it, n entries are appended with its key,
// and a second run brings its index up to date, so that the timed runs
// measure the steady state.
func runData(b *testing.B, bin, dir, name string, n int) string {
	data := filepath.Join(dir, name)
	if err := os.MkdirAll(data, 0o711); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command(bin, "--data", data, "keys", "generate").CombinedOutput(); err != nil {
		b.Fatalf("sandtrail keys generate: %v\n%s", err, out)
	}
	runTrue(b, bin, data, hostedHere, 0)
	signer, err := journal.LoadSigner(filepath.Join(data, "keys", "checkpoint.key"))
	if err != nil {
		b.Fatal(err)
	}
	j, err := journal.Open(filepath.Join(data, "journal"), signer)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 4096
	evs := make([]*event.Event, batch)
	t0 := time.Now().UTC()
	for i := 0; i < n; i += batch {
		for k := range evs {
			evs[k] = &event.Event{Kind: event.KindExec, Source: event.SourceKernel, SessionID: "bench-filler",
				TS:   t0.Add(time.Duration(i+k) * time.Microsecond),
				Proc: &event.Proc{Pid: int32(1000 + k), Comm: "filler", Exe: "/usr/bin/true", Argv: []string{"true", fmt.Sprint(i + k)}}}
		}
		if err := j.Append(context.Background(), evs[:min(batch, n-i)]...); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	runTrue(b, bin, data, hostedHere, 0)
	return data
}

// The hosts of a session, as run's summary names them.
const (
	hostedHere     = "this process"
	hostedByDaemon = "daemon"
)

// runTrue runs `sandtrail run -- true` on data and returns how long it
// took; it fails unless the summary says the session was hosted by
// hostedBy, its journal is intact and has at least atLeast entries.
func runTrue(b *testing.B, bin, data, hostedBy string, atLeast uint64) time.Duration {
	cmd := exec.Command(bin, "--data", data, "run", "--format", "json", "--", "true")
	cmd.Env = append(os.Environ(), "SANDTRAIL_LOG_LEVEL=warn", "SANDTRAIL_SOCKET="+filepath.Join(data, "run", "ingest.sock"))
	start := time.Now()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	d := time.Since(start)
	if err != nil {
		b.Fatalf("sandtrail run -- true: %v\n%s%s", err, out, stderr.String())
	}
	var sum struct {
		HostedBy string `json:"hosted_by"`
		Events   uint64 `json:"events"`
		Journal  struct {
			Status  string `json:"status"`
			Entries uint64 `json:"entries"`
		} `json:"journal"`
	}
	// The summary is the last JSON object on stderr.
	i := strings.LastIndex(stderr.String(), "{\n  \"session_id\"")
	if i < 0 {
		b.Fatalf("sandtrail run -- true: no summary on stderr:\n%s", stderr.String())
	}
	if err := json.Unmarshal([]byte(stderr.String()[i:]), &sum); err != nil {
		b.Fatalf("run's summary: %v\n%s", err, stderr.String())
	}
	if sum.Journal.Status != "intact" || sum.Journal.Entries < atLeast {
		b.Fatalf("run's summary: journal %s with %d entries, want intact with at least %d", sum.Journal.Status, sum.Journal.Entries, atLeast)
	}
	if sum.HostedBy != hostedBy {
		b.Fatalf("run's summary: hosted by %q, want %q", sum.HostedBy, hostedBy)
	}
	// session create, start, terminate and cleanup, and the kernel's exec
	// and exit of true, at least: a session whose kernel events were not
	// waited for has fewer.
	if sum.Events < 6 {
		b.Fatalf("run's summary: %d events, want at least 6 (the session's 4 and true's exec and exit)\n%s", sum.Events, stderr.String())
	}
	return d
}

// runSetup checks that sandtrail run can work here, skipping when it
// cannot, builds sandtrail (or takes the binary that SANDTRAIL_BENCH_BIN
// names, to compare another build in the same run), and returns the binary
// and a directory for data dirs that the agent can reach.
func runSetup(b *testing.B) (bin, dir string) {
	if os.Geteuid() != 0 {
		b.Skip("skipping: sandtrail run needs root")
	}
	if _, err := user.Lookup("sandtrail-agent"); err != nil {
		b.Skip("skipping: needs the sandtrail-agent user (install.sh creates it)")
	}
	// Not b.TempDir: the agent must reach its workdir beneath the data
	// dir, and the test's temporary root is mode 0700.
	dir, err := os.MkdirTemp("", "sandtrail-bench-run-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		b.Fatal(err)
	}
	if bin = os.Getenv("SANDTRAIL_BENCH_BIN"); bin != "" {
		return bin, dir
	}
	bin = filepath.Join(dir, "sandtrail")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sandtrail/sandtrail/cmd/sandtrail").CombinedOutput(); err != nil {
		b.Fatalf("building sandtrail: %v\n%s", err, out)
	}
	return bin, dir
}

// BenchmarkRunTrue measures `sandtrail run -- true` against the baseline
// of `true` run with os/exec, interleaved, in the same run: standalone (run
// hosts the session itself: it loads the collector, opens the journal, and
// closes both; target 1 s) and on a daemon host (a `sandtrail daemon` on
// the same data dir hosts it; target 100 ms). Each run must report the
// session hosted where it should be, its journal intact and the kernel's
// exec and exit of true. The daemon's sub-benchmark then stops the daemon
// with SIGTERM and reports how long it took to exit and what its host's
// parts took to close, the journal's among them (its "host stopped" debug
// line).
func BenchmarkRunTrue(b *testing.B) {
	bin, dir := runSetup(b)
	// The framework calls each sub-benchmark more than once (b.N 1 first):
	// each call has a data dir of its own.
	b.Run("standalone", func(b *testing.B) {
		data := runData(b, bin, dir, fmt.Sprint("standalone-", b.N), 0)
		runTrueAgainstBaseline(b, bin, data, hostedHere)
	})
	b.Run("daemon", func(b *testing.B) {
		data := runData(b, bin, dir, fmt.Sprint("daemon-", b.N), 0)
		d := startBenchDaemon(b, bin, data)
		runTrueAgainstBaseline(b, bin, data, hostedByDaemon)
		d.stop(b)
	})
}

// runTrueAgainstBaseline times b.N pairs of `true` (os/exec) and
// `sandtrail run -- true` on data, and reports both medians and their
// ratio.
func runTrueAgainstBaseline(b *testing.B, bin, data, hostedBy string) {
	var base, run []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
		base = append(base, time.Since(t0))
		run = append(run, runTrue(b, bin, data, hostedBy, 0))
	}
	b.StopTimer()
	mb, mr := medianDuration(base), medianDuration(run)
	b.ReportMetric(float64(mb.Microseconds()), "us/true")
	b.ReportMetric(float64(mr.Microseconds())/1000, "ms/run")
	b.ReportMetric(float64(mr)/float64(mb), "x-true")
}

// benchDaemon is a `sandtrail daemon` that a benchmark started, and its
// log.
type benchDaemon struct {
	cmd *exec.Cmd
	log *os.File
}

// startBenchDaemon starts `sandtrail daemon` on data, logging at debug
// level, and returns once its control socket answers.
func startBenchDaemon(b *testing.B, bin, data string) *benchDaemon {
	log, err := os.Create(filepath.Join(data, "daemon.log"))
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(data, "run", "ingest.sock")
	cmd := exec.Command(bin, "--data", data, "daemon")
	cmd.Env = append(os.Environ(), "SANDTRAIL_LOG_LEVEL=debug", "SANDTRAIL_SOCKET="+sock)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	d := &benchDaemon{cmd: cmd, log: log}
	b.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			d.cmd.Wait()
		}
		log.Close()
	})
	ctl := filepath.Join(data, "run", "control.sock")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", ctl); err == nil {
			c.Close()
			return d
		}
		if time.Now().After(deadline) {
			b.Fatalf("sandtrail daemon: no control socket after 2 minutes:\n%s", d.logText(b))
		}
	}
}

// stop stops the daemon with SIGTERM and reports how long it took to exit
// ("shutdown-ms") and what closing its collector and its journal took
// ("collector-close-ms", "journal-close-ms", from its log's "host stopped"
// line).
func (d *benchDaemon) stop(b *testing.B) {
	t0 := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	if err := d.cmd.Wait(); err != nil {
		b.Fatalf("sandtrail daemon: %v\n%s", err, d.logText(b))
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, "shutdown-ms")
	text := d.logText(b)
	for _, part := range []string{"collector", "journal"} {
		m := regexp.MustCompile(`host stopped: .*\b` + part + `="?([0-9.]+[a-zµ]+)`).FindStringSubmatch(text)
		if m == nil {
			// A build from before the line (SANDTRAIL_BENCH_BIN).
			b.Logf("sandtrail daemon: no %s time in a host stopped line", part)
			continue
		}
		took, err := time.ParseDuration(m[1])
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(took.Microseconds())/1000, part+"-close-ms")
	}
}

func (d *benchDaemon) logText(b *testing.B) string {
	out, err := os.ReadFile(d.log.Name())
	if err != nil {
		b.Fatal(err)
	}
	return string(out)
}
