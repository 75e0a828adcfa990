//go:build 386 || amd64 || arm64

package collector

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
)

// TestSync runs a process in a watched cgroup and checks that, once Sync
// returns n, the first n events the consumer takes hold its exec and its
// exit, each time, although the reader is set to look at the ring buffer
// only once a minute and the kernel not to wake it: Sync wakes it, and
// waits for what it read (the exec waits for its hash, too).
func TestSync(t *testing.T) {
	requireKernel(t)
	cg := cgrouptest.New(t)
	c, err := New(hclog.NewNullLogger(), WithWakeup(2<<20, time.Minute))
	if err != nil {
		t.Fatalf("New() = %v, want a collector", err)
	}
	defer c.Close()
	if err := c.Watch(cg.ID, "sess-sync"); err != nil {
		t.Fatalf("Watch() = %v", err)
	}
	var (
		mu  sync.Mutex
		evs []*event.Event
	)
	go func() {
		for ev := range c.Events() {
			mu.Lock()
			evs = append(evs, ev)
			mu.Unlock()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range 3 {
		cmd := exec.Command("/bin/true", "sync-round")
		cmd.SysProcAttr = cg.SysProcAttr(t, nobody)
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		pid := int32(cmd.Process.Pid)
		n, err := c.Sync(ctx)
		if err != nil {
			t.Fatalf("round %d: Sync() = %v", round, err)
		}
		var taken []*event.Event
		for {
			mu.Lock()
			if uint64(len(evs)) >= n {
				taken = append(taken, evs[:n]...)
			}
			mu.Unlock()
			if taken != nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("round %d: the consumer took fewer than Sync's %d events", round, n)
			}
			time.Sleep(time.Millisecond)
		}
		own := inSession(taken, "sess-sync", event.KindExec)
		if findPid(own, event.KindExec, pid) == nil {
			t.Errorf("round %d: the first %d events hold no exec of pid %d: %v", round, n, pid, kinds(taken))
		}
		if findPid(inSession(taken, "sess-sync", event.KindExit), event.KindExit, pid) == nil {
			t.Errorf("round %d: the first %d events hold no exit of pid %d: %v", round, n, pid, kinds(taken))
		}
	}
	c.Close()
	if _, err := c.Sync(ctx); err != nil {
		t.Errorf("Sync() after Close = %v, want nil", err)
	}
}
