package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
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
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o711); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, "sandtrail")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sandtrail/sandtrail/cmd/sandtrail").CombinedOutput(); err != nil {
		b.Fatalf("building sandtrail: %v\n%s", err, out)
	}
	small, large := runData(b, bin, dir, "small", 1_000), runData(b, bin, dir, "large", 1_000_000)
	var ds, dl []time.Duration
	b.ResetTimer()
	for range b.N {
		for range 5 {
			ds = append(ds, runTrue(b, bin, small, 1_000))
			dl = append(dl, runTrue(b, bin, large, 1_000_000))
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
	runTrue(b, bin, data, 0)
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
	runTrue(b, bin, data, 0)
	return data
}

// runTrue runs `sandtrail run -- true` on data and returns how long it
// took; it fails unless the summary says the journal is intact and has at
// least atLeast entries.
func runTrue(b *testing.B, bin, data string, atLeast uint64) time.Duration {
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
		Journal struct {
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
	return d
}
