package daemon

import (
	"context"
	"sync"

	"github.com/sandtrail/sandtrail/record/event"
)

// alertSubs are the watchers of a session's alerts as the live rules raise
// them: `sandtrail run` prints its session's on stderr.
type alertSubs struct {
	mu   sync.Mutex
	next int
	subs map[string]map[int]func(*event.Event)
}

// WatchAlerts calls fn with each alert raised in the session from now on,
// before it is journaled (it has no seq yet), until cancel is called. fn
// runs on the live rules' path and must not block: hand the event to a
// buffered channel and drop it when full.
func (d *Daemon) WatchAlerts(session string, fn func(*event.Event)) (cancel func()) {
	a := &d.alerts
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.subs == nil {
		a.subs = map[string]map[int]func(*event.Event){}
	}
	if a.subs[session] == nil {
		a.subs[session] = map[int]func(*event.Event){}
	}
	id := a.next
	a.next++
	a.subs[session][id] = fn
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		delete(a.subs[session], id)
		if len(a.subs[session]) == 0 {
			delete(a.subs, session)
		}
	}
}

// emitRaised journals an event the live rules raised, as the policy's
// detections section has it (a package view rule it disables raises
// nothing), and shows an alert to its session's watchers. It appends through the tap at once, on the
// writer's goroutine, not through the queue: the alert follows its
// evidence without waiting behind a burst, and one raised while the queue
// drains at shutdown is journaled, not dropped by a closed queue.
func (d *Daemon) emitRaised(e *event.Event) {
	if !d.det.Set().Apply(e.Alert) {
		return
	}
	if e.Kind == event.KindAlert {
		d.alerts.mu.Lock()
		for _, fn := range d.alerts.subs[e.SessionID] {
			fn(e)
		}
		d.alerts.mu.Unlock()
	}
	if err := d.app.Append(context.Background(), e); err != nil {
		d.log.Error("journaling a live rule's event failed", "kind", e.Kind, "session_id", e.SessionID, "error", err)
	}
}
