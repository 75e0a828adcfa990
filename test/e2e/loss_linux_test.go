package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// helperStorm runs, for args[0] seconds, one goroutine that forks and
// execs /bin/true and two that create (and remove) files beneath the
// directory args[1], as fast as they can; then it prints what it did:
// "execs N creates M".
func helperStorm(args []string) int {
	secs, _ := strconv.Atoi(args[0])
	dir := args[1]
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	var execs, creates atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(deadline) {
			// Start returns once the exec has happened.
			c := exec.Command("/bin/true")
			if c.Start() == nil {
				execs.Add(1)
				_ = c.Wait()
			}
		}
	}()
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := filepath.Join(dir, strconv.Itoa(w))
			if os.MkdirAll(d, 0o755) != nil {
				return
			}
			for i := 0; time.Now().Before(deadline); i++ {
				p := filepath.Join(d, strconv.Itoa(i))
				f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
				if err != nil {
					continue
				}
				creates.Add(1)
				f.Close()
				os.Remove(p)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("execs %d creates %d\n", execs.Load(), creates.Load())
	return 0
}

// TestRunLossUnderOverload: a session that execs and creates files as fast
// as it can for 20 s overloads the collector; for each kind, what the
// journal holds plus what collector.loss counts is at least what the agent
// did, through the session's end.
func TestRunLossUnderOverload(t *testing.T) {
	e := newEnv(t)
	secs := "20"
	if testing.Short() {
		secs = "3"
	}
	r := e.run(append([]string{"--user", "nobody", "--"}, helperCmd("storm", secs, "storm")...)...)
	if r.code != 0 {
		t.Fatalf("sandtrail run exit code = %d, want 0\n%s", r.code, r.stderr)
	}
	var did struct{ execs, creates uint64 }
	if _, err := fmt.Sscanf(strings.TrimSpace(r.stdout), "execs %d creates %d", &did.execs, &did.creates); err != nil {
		t.Fatalf("the storm's report %q: %v", r.stdout, err)
	}
	// Read the whole journal (it holds only this session, and host-wide
	// losses), decoding only what is counted: it is large.
	c := e.cmd("query", "--format", "jsonl")
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	storm := "/work/storm/"
	recorded := map[string]uint64{}
	lost := map[string]uint64{}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			SessionID string `json:"session_id"`
			Kind      string `json:"kind"`
			Proc      *struct {
				Exe string `json:"exe"`
			} `json:"proc"`
			File *struct {
				Path  string `json:"path"`
				Count uint64 `json:"count"`
			} `json:"file"`
			Loss *struct {
				Count    uint64 `json:"count"`
				LostKind string `json:"lost_kind"`
			} `json:"loss"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("query output line: %v", err)
		}
		switch {
		case ev.Kind == "collector.loss":
			lost[ev.Loss.LostKind] += ev.Loss.Count
		case ev.SessionID != r.summary.SessionID:
		case ev.Kind == "process.exec" && ev.Proc != nil && ev.Proc.Exe == "/bin/true":
			recorded["process.exec"]++
		case ev.Kind == "file.create" && ev.File != nil && strings.Contains(ev.File.Path, storm):
			n := ev.File.Count
			if n == 0 {
				n = 1
			}
			recorded["file.create"] += n
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("sandtrail query: %v", err)
	}
	t.Logf("the agent did %d execs and %d creates; recorded %v, lost %v", did.execs, did.creates, recorded, lost)
	for kind, n := range map[string]uint64{"process.exec": did.execs, "file.create": did.creates} {
		// A loss of no kind could be any of them, and one of the kind's
		// category alone ("file": a file record lost before its op was
		// read) any of the category's.
		category, _, _ := strings.Cut(kind, ".")
		if got := recorded[kind] + lost[kind] + lost[category] + lost[""]; got < n {
			t.Errorf("%s: recorded %d + lost %d (+ %d of its category, %d of no kind) = %d, want at least the %d the agent did",
				kind, recorded[kind], lost[kind], lost[category], lost[""], got, n)
		}
	}
	e.verify()
}
