package server

import (
	"sync"

	"github.com/sandtrail/sandtrail/kernel/attribution"
)

// Sessions maps a v2 cgroup id to the session that owns that cgroup
// (attribution.Sessions). Session management registers each session's
// cgroup; the attribution step walks up from the peer's cgroup, so a
// descendant cgroup belongs to its ancestor's session.
type Sessions = attribution.Sessions

// Table is a concurrency-safe Sessions that session management registers
// into.
type Table struct {
	mu sync.RWMutex
	m  map[uint64]string
}

var _ Sessions = (*Table)(nil)

// NewTable returns an empty table.
func NewTable() *Table { return &Table{m: make(map[uint64]string)} }

// Register maps cgroupID to sessionID, replacing any earlier mapping.
func (t *Table) Register(cgroupID uint64, sessionID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[cgroupID] = sessionID
}

// Unregister removes cgroupID's mapping.
func (t *Table) Unregister(cgroupID uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, cgroupID)
}

// Lookup returns the session registered for cgroupID.
func (t *Table) Lookup(cgroupID uint64) (string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s, ok := t.m[cgroupID]
	return s, ok
}

// Len returns the number of registered cgroups.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}
