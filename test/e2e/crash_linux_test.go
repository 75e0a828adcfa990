package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest"
)

// TestDaemonKill9 kills the real daemon with SIGKILL while four clients
// stream events into it, restarts it, and checks that every event the
// daemon acknowledged is in the journal, exactly once, and that the journal
// verifies against a checkpoint held from before the crash.
func TestDaemonKill9(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	startDaemon := func() (*os.Process, *bytes.Buffer, <-chan error) {
		d := e.cmd("daemon")
		var log bytes.Buffer
		d.Stdout, d.Stderr = &log, &log
		// A stale socket file from the killed daemon must not look live.
		_ = os.Remove(e.sock)
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- d.Wait() }()
		waitFor(t, "the ingest socket", func() bool { _, err := os.Stat(e.sock); return err == nil })
		return d.Process, &log, done
	}

	daemon, _, done := startDaemon()
	const clients = 4
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		sent  int
		wg    sync.WaitGroup
	)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := ingest.Dial(e.sock, ingest.WithTimeout(5*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			for b := 0; ctx.Err() == nil; b++ {
				evs := make([]*event.Event, 16)
				for i := range evs {
					evs[i] = &event.Event{V: event.SchemaVersion, TS: time.Now(), SessionID: "crash",
						Kind: "tool.invoke", Source: event.SourceAPI, EventID: ingest.NewEventID(),
						Tool: &event.Tool{Name: fmt.Sprintf("client-%d", c), Status: "ok", IO: event.IO{InputSummary: fmt.Sprintf("batch %d event %d", b, i)}}}
				}
				err := cl.Send(ctx, evs...)
				mu.Lock()
				sent += len(evs)
				if err == nil {
					for _, ev := range evs {
						acked[ev.EventID] = true
					}
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // the daemon is down
				}
			}
		}()
	}

	// Let acknowledgements accumulate, keep a checkpoint as an off-host
	// copy would be kept, then kill the daemon mid-stream.
	waitFor(t, "2,000 acknowledged events", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 2000 })
	held := filepath.Join(t.TempDir(), "held-checkpoint")
	waitFor(t, "a signed checkpoint", func() bool {
		b, err := os.ReadFile(filepath.Join(e.data, "journal", "checkpoints", "latest"))
		return err == nil && os.WriteFile(held, b, 0o600) == nil
	})
	if err := daemon.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	time.Sleep(100 * time.Millisecond) // clients see the daemon gone
	stop()
	wg.Wait()
	mu.Lock()
	want := len(acked)
	mu.Unlock()
	t.Logf("%d events sent, %d acknowledged before SIGKILL", sent, want)

	// Restart, and stop gracefully so that the tail gets checkpointed.
	daemon, log, done := startDaemon()
	if err := daemon.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("restarted daemon: %v\n%s", err, log)
		}
	case <-time.After(time.Minute):
		_ = daemon.Kill()
		t.Fatalf("restarted daemon did not stop on SIGTERM\n%s", log)
	}

	seen := map[string]int{}
	for _, ev := range e.events("crash") {
		seen[ev.EventID]++
	}
	missing := 0
	for id := range acked {
		if seen[id] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged events are missing after kill -9 and restart", missing, want)
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("event %s journaled %d times", id, n)
		}
	}
	if out, err := e.cmd("verify", "--checkpoint", held).CombinedOutput(); err != nil {
		t.Errorf("sandtrail verify --checkpoint (held from before the crash): %v\n%s", err, out)
	}
}
