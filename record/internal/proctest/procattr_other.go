//go:build !linux

package proctest

import "syscall"

// setParentDeathSignal does nothing: only Linux has a parent-death signal.
func setParentDeathSignal(*syscall.SysProcAttr) {}
