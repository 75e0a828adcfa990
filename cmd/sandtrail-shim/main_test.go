package main

import (
	"slices"
	"testing"

	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/shims"
)

// TestEveryCommandHasAPlan: the shim stands in for every command of the
// registry's managers (resolver.Ecosystem.Commands), in its order, each
// with its manager and ecosystem, and plans nothing else.
func TestEveryCommandHasAPlan(t *testing.T) {
	var want []string
	for _, e := range resolver.Ecosystems() {
		for _, c := range e.Commands() {
			want = append(want, c)
			i := slices.IndexFunc(managers, func(m shims.Manager) bool { return m.Name == c })
			if i < 0 {
				t.Errorf("%s's command %q has no plan in the shim (cmd/sandtrail-shim: plans)", e.Name(), c)
				continue
			}
			if m := managers[i]; m.Manager != e.Manager() || m.Ecosystem != e.Name() || m.Plan == nil {
				t.Errorf("the shim's %s = {manager %q, ecosystem %q, plan %v}, want {%q %q, a plan}", c, m.Manager, m.Ecosystem, m.Plan != nil, e.Manager(), e.Name())
			}
		}
	}
	var got []string
	for _, m := range managers {
		got = append(got, m.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the shim stands in for %q, want the registry's commands %q", got, want)
	}
	for c := range plans {
		if !slices.Contains(want, c) {
			t.Errorf("the shim has a plan for %q, which runs no manager of the registry", c)
		}
	}
}
