//go:build !unix

package shims

import (
	"errors"
	"os/exec"
)

// ErrNotSupported: the shims run on Unix only.
var ErrNotSupported = errors.New("shims: not supported on this OS")

type status struct{ code int }

func (s status) exit() int { return s.code }

func runForwarding(*exec.Cmd) (status, int, error) { return status{}, 0, ErrNotSupported }

func execve(string, []string, []string) error { return ErrNotSupported }
