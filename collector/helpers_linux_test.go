//go:build 386 || amd64 || arm64

package collector

import (
	"os"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/record/event"
)

// withReaderGate holds the reader back until gate is closed.
func withReaderGate(gate <-chan struct{}) Option {
	return func(o *options) error {
		o.gate = gate
		return nil
	}
}

// requireKernel skips the test when it cannot load BPF programs.
func requireKernel(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: loading BPF programs needs root")
	}
	if _, err := os.Stat(btfPath); err != nil {
		t.Skipf("skipping: kernel BTF is missing: %v", err)
	}
}

// recorder starts a collector and collects every event it emits.
type recorder struct {
	c    *Collector
	evs  []*event.Event
	done chan struct{}
	// start, when not nil, holds the consumer back until it is closed.
	start chan struct{}
}

func startRecorder(t testing.TB, hold bool, opts ...Option) *recorder {
	t.Helper()
	log := hclog.New(&hclog.LoggerOptions{Name: "test", Level: hclog.Warn, Output: os.Stderr})
	c, err := New(log, opts...)
	if err != nil {
		t.Fatalf("New() = %v, want a collector", err)
	}
	r := &recorder{c: c, done: make(chan struct{})}
	if hold {
		r.start = make(chan struct{})
	}
	go func() {
		defer close(r.done)
		if r.start != nil {
			<-r.start
		}
		for ev := range c.Events() {
			r.evs = append(r.evs, ev)
		}
	}()
	t.Cleanup(func() { c.Close() })
	return r
}

// stop closes the collector and returns everything it emitted.
func (r *recorder) stop(t testing.TB) []*event.Event {
	t.Helper()
	if r.start != nil {
		close(r.start)
		r.start = nil
	}
	if err := r.c.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	<-r.done
	for _, ev := range r.evs {
		if err := ev.Validate(); err != nil {
			t.Errorf("event %+v: Validate() = %v", ev, err)
		}
		if _, err := event.Marshal(ev); err != nil {
			t.Errorf("event %+v: Marshal() = %v", ev, err)
		}
	}
	return r.evs
}

// inSession returns the events of session sid with the given kind.
func inSession(evs []*event.Event, sid, kind string) []*event.Event {
	var out []*event.Event
	for _, ev := range evs {
		if ev.SessionID == sid && ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// losses sums the collector.loss counts per lost kind.
func losses(evs []*event.Event) map[string]uint64 {
	out := map[string]uint64{}
	for _, ev := range evs {
		if ev.Kind == event.KindLoss {
			out[ev.Loss.LostKind] += ev.Loss.Count
		}
	}
	return out
}
