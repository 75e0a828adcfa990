package server

import "testing"

// TestConnCapsCounting checks the accounting alone: the order of the caps,
// root's reserve, and that releasing restores every count.
func TestConnCapsCounting(t *testing.T) {
	c := newConnCaps(8, 2) // 1 reserved, 7 shared, 2 per peer
	steps := []struct {
		name       string
		key        string
		privileged bool
		want       overCap
	}{
		{name: "a 1", key: "session a", want: capNone},
		{name: "a 2", key: "session a", want: capNone},
		{name: "a 3 over its cap", key: "session a", want: capPeer},
		{name: "b 1", key: "uid 1", want: capNone},
		{name: "b 2", key: "uid 1", want: capNone},
		{name: "c 1", key: "uid 2", want: capNone},
		{name: "c 2", key: "uid 2", want: capNone},
		{name: "d 1", key: "uid 3", want: capNone},
		{name: "d 2 over the share", key: "uid 3", want: capShared},
		{name: "root in its reserve", privileged: true, want: capNone},
		{name: "root over the total", privileged: true, want: capTotal},
		{name: "e over the total", key: "uid 4", want: capTotal},
	}
	var held []int
	for i, s := range steps {
		if got, _ := c.acquire(s.key, s.privileged); got != s.want {
			t.Fatalf("step %s: acquire(%q, %v) = %d, want %d", s.name, s.key, s.privileged, got, s.want)
		}
		if s.want == capNone {
			held = append(held, i)
		}
	}
	for _, i := range held {
		c.release(steps[i].key, steps[i].privileged)
	}
	if c.total != 0 || c.shared != 0 || c.peers() != 0 {
		t.Errorf("after releasing all: total %d, shared %d, peers %d, want 0, 0, 0", c.total, c.shared, c.peers())
	}
}

// TestConnCapsReserve: the reserve is an eighth of the cap, at least one.
func TestConnCapsReserve(t *testing.T) {
	for _, tt := range []struct{ max, want int }{{0, 0}, {1, 0}, {2, 1}, {16, 2}, {256, 32}} {
		if got := newConnCaps(tt.max, 1).reserve; got != tt.want {
			t.Errorf("newConnCaps(%d, 1).reserve = %d, want %d", tt.max, got, tt.want)
		}
	}
}
