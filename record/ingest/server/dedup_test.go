package server

import (
	"fmt"
	"testing"
)

func TestDedupClaims(t *testing.T) {
	d := newDedup(3)
	steps := []struct {
		name string
		do   func() claim
		want claim
	}{
		{name: "first claim", do: func() claim { return d.claim("a") }, want: claimNew},
		{name: "while pending", do: func() claim { return d.claim("a") }, want: claimPending},
		{name: "after failed append", do: func() claim { d.settle([]string{"a"}, false); return d.claim("a") }, want: claimNew},
		{name: "after journaled", do: func() claim { d.settle([]string{"a"}, true); return d.claim("a") }, want: claimSeen},
		{name: "evicted oldest", do: func() claim {
			for i := range 3 {
				d.remember(fmt.Sprint("x", i))
			}
			return d.claim("a")
		}, want: claimNew},
		{name: "newest kept", do: func() claim { return d.claim("x2") }, want: claimSeen},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if got := s.do(); got != s.want {
				t.Fatalf("claim = %v, want %v", got, s.want)
			}
		})
	}
	if got := d.len(); got != 3 {
		t.Fatalf("len() = %d, want 3", got)
	}
}

func TestTable(t *testing.T) {
	tb := NewTable()
	tb.Register(7, "s")
	if got, ok := tb.Lookup(7); !ok || got != "s" {
		t.Fatalf("Lookup(7) = %q, %v, want s, true", got, ok)
	}
	tb.Unregister(7)
	if got, ok := tb.Lookup(7); ok {
		t.Fatalf("Lookup(7) after Unregister = %q, true, want not found", got)
	}
}
