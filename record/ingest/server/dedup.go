package server

import "sync"

// dedup remembers the event ids already journaled (a bounded FIFO set) and
// the ids being journaled right now.
type dedup struct {
	mu      sync.Mutex
	cap     int
	seen    map[string]struct{}
	ring    []string
	next    int
	pending map[string]struct{}
}

func newDedup(capacity int) *dedup {
	return &dedup{
		cap:     capacity,
		seen:    make(map[string]struct{}, capacity),
		ring:    make([]string, capacity),
		pending: make(map[string]struct{}),
	}
}

type claim int

const (
	claimNew claim = iota
	claimSeen
	claimPending
)

// claim marks id pending unless it was already seen or is pending.
func (d *dedup) claim(id string) claim {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.seen[id]; ok {
		return claimSeen
	}
	if _, ok := d.pending[id]; ok {
		return claimPending
	}
	d.pending[id] = struct{}{}
	return claimNew
}

// settle ends the pending state of ids, remembering them when they were
// journaled.
func (d *dedup) settle(ids []string, journaled bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		delete(d.pending, id)
		if journaled {
			d.addLocked(id)
		}
	}
}

// remember records id as journaled.
func (d *dedup) remember(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addLocked(id)
}

func (d *dedup) addLocked(id string) {
	if _, ok := d.seen[id]; ok {
		return
	}
	if old := d.ring[d.next]; old != "" {
		delete(d.seen, old)
	}
	d.ring[d.next] = id
	d.seen[id] = struct{}{}
	d.next = (d.next + 1) % d.cap
}

func (d *dedup) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen)
}
