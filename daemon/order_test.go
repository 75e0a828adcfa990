package daemon

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/queue"
)

// orderJournal records the kinds appended, in order; its first append
// waits until the test releases it, as a journal behind a burst does.
type orderJournal struct {
	mu      sync.Mutex
	kinds   []string
	first   chan struct{} // closed when the first append begins
	release chan struct{}
	n       int
}

func (j *orderJournal) Append(_ context.Context, evs ...*event.Event) error {
	j.mu.Lock()
	j.n++
	n := j.n
	j.mu.Unlock()
	if n == 1 {
		close(j.first)
		<-j.release
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range evs {
		j.kinds = append(j.kinds, e.Kind)
	}
	return nil
}

// TestClaimsAfterDaemon: the mirror's pkg.fetch waits in the queue behind
// an append under way when the shim's pkg.install of it arrives at the
// ingest server; the install is journaled after the fetch. Appended at
// once, as before, it was journaled first.
func TestClaimsAfterDaemon(t *testing.T) {
	j := &orderJournal{first: make(chan struct{}), release: make(chan struct{})}
	q := queue.New(j)
	defer q.Close()
	q.Emit(&event.Event{Kind: event.KindExec})
	<-j.first
	q.Emit(&event.Event{Kind: event.KindPkgFetch})
	done := make(chan error, 1)
	go func() {
		done <- claimsAfterDaemon{flush: q.Flush, app: j}.Append(t.Context(), &event.Event{Kind: event.KindPkgInstall})
	}()
	select {
	case err := <-done:
		close(j.release)
		t.Fatalf("the pkg.install was appended (%v) while the queue held the pkg.fetch", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(j.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if want := []string{event.KindExec, event.KindPkgFetch, event.KindPkgInstall}; len(j.kinds) != 3 || j.kinds[1] != want[1] || j.kinds[2] != want[2] {
		t.Errorf("journaled %v, want %v", j.kinds, want)
	}
}
