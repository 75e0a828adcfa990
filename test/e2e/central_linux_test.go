package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandtrail/sandtrail/record/central/centraltest"
	"github.com/sandtrail/sandtrail/record/sink"
	"github.com/sandtrail/sandtrail/record/sink/sinktest"
)

// centralHost is one host of the scale-out test: a sandtrail installation
// whose daemon publishes to the cluster.
type centralHost struct {
	name string
	e    *env
	stop func()
}

// startDaemon starts `sandtrail daemon ARGS...` of e and waits for its
// control socket; stop ends it with SIGTERM and fails the test if it does
// not end cleanly.
func (e *env) startDaemon(args ...string) (stop func()) {
	e.t.Helper()
	d := e.cmd(append([]string{"daemon"}, args...)...)
	var (
		mu  sync.Mutex
		log bytes.Buffer
	)
	d.Stdout = writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return log.Write(b) })
	d.Stderr = d.Stdout
	if err := e.start(d); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Wait() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = d.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-done:
				if err != nil {
					mu.Lock()
					e.t.Errorf("daemon: %v\n%s", err, log.String())
					mu.Unlock()
				}
			case <-time.After(60 * time.Second):
				_ = d.Process.Kill()
				e.t.Errorf("daemon did not stop on SIGTERM")
			}
		})
	}
	e.t.Cleanup(stop)
	ctl := filepath.Join(filepath.Dir(e.sock), "control.sock")
	waitFor(e.t, "the control socket", func() bool { _, err := os.Stat(ctl); return err == nil })
	return stop
}

// startCentralHost makes a host named name whose daemon has a nats sink to
// the cluster (R3, and a short duplicate window so that the test can
// replay a message), and puts its journal key in keys as <name>.pub.
func startCentralHost(t *testing.T, name, urls, keys string) *centralHost {
	e := newEnv(t)
	cfg := filepath.Join(e.data, "config.yaml")
	body := fmt.Sprintf("host: %s\nsinks:\n  - name: central\n    type: nats\n    url: %s\n    replicas: 3\n    duplicates: 3s\n", name, urls)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "SANDTRAIL_CONFIG="+cfg)
	if err := copyFile(filepath.Join(e.data, "keys", "checkpoint.pub"), filepath.Join(keys, name+".pub"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &centralHost{name: name, e: e, stop: e.startDaemon()}
}

// aggregator is a running `sandtrail aggregate`.
type aggregator struct {
	cmd  *exec.Cmd
	done chan error
	log  *bytes.Buffer
}

func startAggregator(t *testing.T, e *env, urls, dsn, keys string) *aggregator {
	t.Helper()
	a := &aggregator{cmd: e.cmd("aggregate", "--nats", urls, "--postgres", dsn, "--keys", keys, "--verify-every", "500ms",
		"--ack-wait", "5s", "--gap-grace", "20s", "--batch", "200"), done: make(chan error, 1), log: &bytes.Buffer{}}
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.done <- a.cmd.Wait() }()
	t.Cleanup(func() {
		a.kill()
		if t.Failed() {
			out := a.log.String()
			t.Logf("aggregator %d's log (its end):\n%s", a.cmd.Process.Pid, out[max(0, len(out)-4000):])
		}
	})
	return a
}

// kill ends the aggregator at once (SIGKILL), as a crash would.
func (a *aggregator) kill() {
	if a.cmd.ProcessState == nil {
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

// hostWork runs sessions on h, each a shell that reads and writes files and
// runs a few processes, until stop is closed; at least min of them.
func hostWork(t *testing.T, h *centralHost, min int, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; ; i++ {
		if i >= min {
			select {
			case <-stop:
				return
			default:
			}
		}
		script := fmt.Sprintf(`for i in 1 2 3 4 5 6 7 8; do echo %s-%d-$i > /tmp/w$i; cat /tmp/w$i /etc/hostname > /dev/null; ls /tmp > /dev/null; done`, h.name, i)
		r, err := h.e.tryRun("--", "sh", "-c", script)
		if err != nil || r.code != 0 {
			t.Errorf("%s: run %d: %v (exit %d)\n%s", h.name, i, err, r.code, r.stderr)
			return
		}
	}
}

// TestScaleOut: three daemons with their own host ids publish to a real
// 3-node JetStream cluster, read by two aggregators, while one node is
// killed and started again and one aggregator is killed and started again; PostgreSQL ends with every
// entry of every host once, every chain verified to the host's journal,
// the same answers from the CLI on both stores, and no integrity alert.
// Then a fake host and a replayed, altered entry each raise one.
func TestScaleOut(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	pg := centraltest.StartPostgres(t)
	cluster := sinktest.StartNATSCluster(t, 3)
	urls, dsn, keys := cluster.URLs(), pg.DSN(), t.TempDir()
	var hosts []*centralHost
	for _, name := range []string{"host-a", "host-b", "host-c"} {
		hosts = append(hosts, startCentralHost(t, name, urls, keys))
	}
	// Two aggregators share the consumer, as more instances scale out.
	agg := startAggregator(t, hosts[0].e, urls, dsn, keys)
	startAggregator(t, hosts[1].e, urls, dsn, keys)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Add(1)
		go hostWork(t, h, 6, stop, &wg)
	}
	time.Sleep(3 * time.Second)
	cluster.Kill(1) // mid-stream
	time.Sleep(3 * time.Second)
	agg.kill()
	time.Sleep(2 * time.Second)
	agg = startAggregator(t, hosts[0].e, urls, dsn, keys)
	cluster.Restart(1)
	close(stop)
	wg.Wait()
	for _, h := range hosts {
		waitSinkCaughtUp(t, h)
		h.stop() // the sinks send the last checkpoint
	}
	sizes := waitVerified(t, hosts, dsn)
	checkCentralRows(t, dsn, sizes)
	for _, h := range hosts {
		compareCLI(t, h, dsn)
	}
	if got := integrityAlertLines(t, hosts[0].e, dsn); len(got) != 0 {
		t.Fatalf("integrity alerts on clean work: %q", got)
	}
	forgeries(t, hosts[0], urls, dsn)
}

// waitSinkCaughtUp waits until h's sink has sent what its journal holds
// (sandtrail status: lag 0), as an operator would before stopping a
// daemon, whose stop gives its sinks a few seconds only.
func waitSinkCaughtUp(t *testing.T, h *centralHost) {
	t.Helper()
	var last string
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		out, err := h.e.cmd("status", "--format", "json").Output()
		if err != nil {
			t.Fatalf("%s: sandtrail status: %v", h.name, err)
		}
		var sinks []struct {
			Lag uint64 `json:"lag"`
		}
		if err := json.Unmarshal(out, &sinks); err != nil || len(sinks) != 1 {
			t.Fatalf("%s: status %s: %v", h.name, out, err)
		}
		if sinks[0].Lag == 0 {
			return
		}
		last = string(out)
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: its nats sink never caught up with the journal:\n%s", h.name, last)
}

// journalSize is the number of entries of h's journal.
func journalSize(t *testing.T, h *centralHost) uint64 {
	t.Helper()
	out, err := h.e.cmd("verify", "--format", "json").Output()
	if err != nil {
		t.Fatalf("%s: sandtrail verify: %v", h.name, err)
	}
	var rep struct {
		Status  string `json:"status"`
		Entries uint64 `json:"entries"`
	}
	if err := json.Unmarshal(out, &rep); err != nil || rep.Status != "intact" {
		t.Fatalf("%s: verify: %v %s", h.name, err, out)
	}
	return rep.Entries
}

// waitVerified waits until the central store's chain of every host is
// verified to its journal's size, and returns the sizes.
func waitVerified(t *testing.T, hosts []*centralHost, dsn string) map[string]uint64 {
	t.Helper()
	sizes := map[string]uint64{}
	for _, h := range hosts {
		sizes[h.name] = journalSize(t, h)
	}
	var last string
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		out, err := hosts[0].e.cmd("aggregate", "status", "--postgres", dsn, "--format", "json").Output()
		if err != nil {
			t.Fatalf("aggregate status: %v", err)
		}
		var chains []struct {
			Host               string
			Verified, Received uint64
			Broken             string
		}
		if err := json.Unmarshal(out, &chains); err != nil {
			t.Fatal(err)
		}
		ok := len(chains) == len(hosts)
		for _, c := range chains {
			ok = ok && c.Verified == sizes[c.Host] && c.Received == sizes[c.Host] && c.Broken == ""
		}
		if ok {
			return sizes
		}
		last = string(out)
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("chains never verified to the journals' sizes %v:\n%s", sizes, last)
	return nil
}

// checkCentralRows checks PostgreSQL directly: each host's entries are
// exactly its seqs 0..size-1, each once, each an event (none skipped).
func checkCentralRows(t *testing.T, dsn string, sizes map[string]uint64) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for host, size := range sizes {
		var n, distinct, maxSeq, events int64
		err := c.QueryRow(ctx, `SELECT count(*), count(DISTINCT e.seq), coalesce(max(e.seq), -1),
			(SELECT count(*) FROM events v WHERE v.hid = h.hid)
			FROM entries e JOIN hosts h ON h.hid = e.hid WHERE h.host = $1 GROUP BY h.hid`, host).Scan(&n, &distinct, &maxSeq, &events)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if uint64(n) != size || n != distinct || uint64(maxSeq) != size-1 || n != events {
			t.Errorf("%s: %d entries (%d distinct, max seq %d, %d events), want each of the journal's %d once", host, n, distinct, maxSeq, events, size)
		}
	}
}

// compareCLI asks the same questions of h's own index and of the central
// store, through the CLI, and wants the same answers.
func compareCLI(t *testing.T, h *centralHost, dsn string) {
	t.Helper()
	local := func(args ...string) string { return cliOutput(t, h.e, args...) }
	remote := func(args ...string) string { return cliOutput(t, h.e, append(args, "--store", dsn)...) }
	var sessions []struct {
		ID string `json:"session_id"`
	}
	if err := json.Unmarshal([]byte(local("sessions", "--format", "json")), &sessions); err != nil || len(sessions) < 6 {
		t.Fatalf("%s: sessions: %v (%d)", h.name, err, len(sessions))
	}
	id := sessions[len(sessions)/2].ID
	for _, args := range [][]string{
		{"query", "--session", id, "--format", "jsonl"},
		{"query", "--session", id, "--format", "json"},
		{"query", "--session", id, "--kind", "process.exec"},
		{"query", "--session", id, "--path", "/tmp/w3", "--format", "jsonl"},
		{"sessions", "--session", id, "--path", "/etc/hostname", "--format", "json"},
		{"timeline", id, "--format", "json"},
		{"timeline", id},
		{"packages", "--session", id, "--format", "json"},
		{"alerts", "--session", id, "--format", "json"},
		{"export", "--session", id, "--format", "ocsf"},
	} {
		if l, r := local(args...), remote(args...); l != r {
			t.Errorf("%s: sandtrail %s: the central store's answer differs from the host's index:\nindex   %.600s\ncentral %.600s", h.name, strings.Join(args, " "), l, r)
		}
	}
	// The report is the same but for when it was made and whose account of
	// the journal it gives.
	l, r := reportWithoutJournal(t, local("report", id, "--format", "json")), reportWithoutJournal(t, remote("report", id, "--format", "json"))
	if l != r {
		t.Errorf("%s: report %s differs:\nindex   %.600s\ncentral %.600s", h.name, id, l, r)
	}
	var rep struct {
		Journal struct{ Status string } `json:"journal"`
	}
	if err := json.Unmarshal([]byte(remote("report", id, "--format", "json")), &rep); err != nil || rep.Journal.Status != "intact" {
		t.Errorf("%s: the central report's journal status = %q (%v), want intact", h.name, rep.Journal.Status, err)
	}
}

func cliOutput(t *testing.T, e *env, args ...string) string {
	t.Helper()
	c := e.cmd(args...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("sandtrail %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func reportWithoutJournal(t *testing.T, s string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "journal")
	delete(m, "generated")
	b, _ := json.Marshal(m)
	return string(b)
}

// integrityAlertLines are the central store's integrity alerts' summaries.
func integrityAlertLines(t *testing.T, e *env, dsn string) []string {
	t.Helper()
	out := cliOutput(t, e, "alerts", "--rule", "integrity", "--format", "json", "--store", dsn)
	var alerts []struct {
		Alert struct {
			Summary string `json:"summary"`
		} `json:"alert"`
	}
	if err := json.Unmarshal([]byte(out), &alerts); err != nil {
		t.Fatalf("alerts: %v\n%s", err, out)
	}
	var lines []string
	for _, a := range alerts {
		lines = append(lines, a.Alert.Summary)
	}
	return lines
}

// forgeries publishes what an attacker with the stream's credentials
// could: events as a host the store has no key of, and, once the
// duplicate window is past, one of h's entries again with a byte changed.
// Each raises an integrity alert naming the host and the seq.
func forgeries(t *testing.T, h *centralHost, urls, dsn string) {
	t.Helper()
	js := sinktest.JetStream(t, urls)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lines := strings.Split(strings.TrimSpace(cliOutput(t, h.e, "query", "--format", "jsonl", "--limit", "10")), "\n")
	orig := []byte(lines[3])
	var seq struct {
		Seq uint64 `json:"seq"`
	}
	if err := json.Unmarshal(orig, &seq); err != nil {
		t.Fatal(err)
	}
	fake := bytes.Replace(orig, []byte(`"host":"`+h.name+`"`), []byte(`"host":"fake-host"`), 1)
	publish := func(host string, seq uint64, data []byte) {
		msg := &nats.Msg{Subject: sink.Subject(host, "process.exec"), Data: data}
		if _, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(sink.MsgID(host, seq, data))); err != nil {
			t.Fatal(err)
		}
	}
	publish("fake-host", 0, fake)
	time.Sleep(4 * time.Second) // past the stream's 3 s duplicate window
	altered := bytes.Replace(orig, []byte(`"session_id":"`), []byte(`"session_id":"X`), 1)
	publish(h.name, seq.Seq, altered)
	// The fake host's event, a copy of one of h's, also names h's session.
	want := [][2]string{{"host fake-host seq 0:", "journal key"}, {"host fake-host seq 0:", "which is host " + h.name + "'s"},
		{fmt.Sprintf("host %s seq %d:", h.name, seq.Seq), "different bytes"}}
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		got = integrityAlertLines(t, h.e, dsn)
		found := 0
		for _, w := range want {
			for _, g := range got {
				if strings.HasPrefix(g, w[0]) && strings.Contains(g, w[1]) {
					found++
					break
				}
			}
		}
		if found == len(want) {
			if len(got) != len(want) {
				t.Errorf("integrity alerts %q, want one each for %q", got, want)
			}
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("integrity alerts %q, want %q", got, want)
}
