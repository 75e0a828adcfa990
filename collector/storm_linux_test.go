//go:build 386 || amd64 || arm64

package collector

import (
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
)

// stormExecs is the size of the exec storm.
const stormExecs = 20000

// TestExecStorm runs the storm with different ways to lose events and checks
// that every event is either delivered or counted in a collector.loss event.
func TestExecStorm(t *testing.T) {
	requireKernel(t)
	if testing.Short() {
		t.Skip("skipping the exec storm in -short mode")
	}
	for _, c := range []struct {
		name string
		// tinyRing holds the reader back during the storm with a 4 KiB ring
		// buffer, so that the kernel must drop.
		tinyRing bool
		// liveTinyRing uses a 4 KiB ring buffer with the reader running:
		// drops depend on timing, the accounting must be exact anyway.
		liveTinyRing bool
		// tinyQueue holds the consumer back until the reader has seen
		// every record, with a queue of 64, so that the queue must drop.
		tinyQueue bool
	}{
		{name: "default"},
		{name: "tiny ring buffer, live reader", liveTinyRing: true},
		{name: "tiny ring buffer", tinyRing: true},
		{name: "tiny queue", tinyQueue: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cg := cgrouptest.New(t)
			opts := []Option{WithQueueSize(1 << 16)}
			var gate chan struct{}
			if c.tinyRing {
				gate = make(chan struct{})
				opts = append(opts, WithRingBufferSize(4096), withReaderGate(gate))
			}
			if c.liveTinyRing {
				opts = append(opts, WithRingBufferSize(4096))
			}
			if c.tinyQueue {
				opts = append(opts, WithQueueSize(64))
			}
			r := startRecorder(t, c.tinyQueue, opts...)
			const sid = "sess-storm"
			if err := r.c.Watch(cg.ID, sid); err != nil {
				t.Fatalf("Watch() = %v", err)
			}
			if err := cg.ExecStorm(t, stormExecs, 2); err != nil {
				t.Fatalf("exec storm: %v", err)
			}
			if gate != nil {
				close(gate)
			}
			if c.tinyQueue {
				// Wait (without a time limit that could fail the test on a
				// slow machine) until the reader has seen every record.
				for s := r.c.Stats(); s.Received+s.KernelDrops < 3*stormExecs; s = r.c.Stats() {
					time.Sleep(10 * time.Millisecond)
				}
			}
			evs := r.stop(t)
			lost := losses(evs)
			for _, kind := range []string{event.KindExec, event.KindFork, event.KindExit} {
				got := uint64(len(inSession(evs, sid, kind)))
				if got+lost[kind] != stormExecs {
					t.Errorf("%s: received %d + lost %d = %d, want %d", kind, got, lost[kind], got+lost[kind], stormExecs)
				}
			}
			// Every ring-buffer and queue drop of the storm is its
			// session's: only a skipped program run (recursion) is host-wide.
			for _, ev := range evs {
				if ev.Kind != event.KindLoss {
					continue
				}
				own := ev.Loss.Source == LossSourceRingbuf || ev.Loss.Source == LossSourceQueue
				if own && (ev.SessionID != sid || ev.Loss.HostWide) || !own && (ev.SessionID != "" || !ev.Loss.HostWide) {
					t.Errorf("loss %+v of session %q, want session %q for ring-buffer and queue drops, else host-wide", *ev.Loss, ev.SessionID, sid)
				}
			}
			s := r.c.Stats()
			t.Logf("stats %+v, losses %v", s, lost)
			var total uint64
			for _, n := range lost {
				total += n
			}
			if want := s.KernelDrops + s.QueueDrops + s.BPFMisses; total != want {
				t.Errorf("loss events sum to %d, want Stats().KernelDrops+QueueDrops+BPFMisses = %d", total, want)
			}
			if c.tinyRing && s.KernelDrops == 0 {
				t.Errorf("Stats().KernelDrops = 0 with a held reader and a 4 KiB ring, want > 0")
			}
			if c.tinyQueue && s.QueueDrops == 0 {
				t.Errorf("Stats().QueueDrops = 0 with a held consumer and a queue of 64, want > 0")
			}
		})
	}
}
