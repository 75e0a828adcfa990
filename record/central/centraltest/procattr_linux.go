package centraltest

import "syscall"

// setParentDeathSignal has the kernel SIGKILL the server if the test's
// process dies first (a test's timeout panics past every cleanup).
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
