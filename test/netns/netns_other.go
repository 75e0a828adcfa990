//go:build !linux

package netns

import (
	"os/exec"
	"testing"
)

// NS is a network namespace; there are none on this OS.
type NS struct{}

// New skips the test: there are no network namespaces on this OS.
func New(t testing.TB) *NS {
	t.Helper()
	t.Skip(ErrNotSupported.Error())
	return nil
}

// Start returns ErrNotSupported.
func (n *NS) Start(*exec.Cmd) error { return ErrNotSupported }

// Run returns ErrNotSupported.
func (n *NS) Run(*exec.Cmd) error { return ErrNotSupported }

// Output returns ErrNotSupported.
func (n *NS) Output(*exec.Cmd) ([]byte, error) { return nil, ErrNotSupported }

// Do does not call f: there are no network namespaces on this OS.
func (n *NS) Do(func()) {}

// Check returns ErrNotSupported: no dialer may send here.
func Check() error { return ErrNotSupported }
