package sinktest

import "syscall"

// setParentDeathSignal has the kernel SIGKILL a server if the test's
// process dies first (a test's timeout panics past every cleanup).
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
