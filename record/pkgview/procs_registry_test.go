package pkgview

import (
	"testing"

	"github.com/sandtrail/sandtrail/resolver"
)

// TestManagerOfKnowsEveryRegistryCommand: the view recognises every
// command of the registry's managers (resolver.Ecosystem.Commands), run by
// path or by name, as that manager, and names it as the registry does.
func TestManagerOfKnowsEveryRegistryCommand(t *testing.T) {
	for _, e := range resolver.Ecosystems() {
		for _, c := range e.Commands() {
			for _, exe := range []string{c, "/usr/bin/" + c} {
				m := managerOf(exe, []string{c, "install", "x"})
				if m == 0 || managerNames[m] != e.Manager() {
					t.Errorf("managerOf(%q) = %q, want %s's manager %q (record/pkgview/procs.go: managerOf, managerNames)", exe, managerNames[m], e.Name(), e.Manager())
				}
			}
		}
	}
}
