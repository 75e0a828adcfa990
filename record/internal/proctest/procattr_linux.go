package proctest

import "syscall"

// setParentDeathSignal has the kernel SIGKILL the process if the test's
// process dies first.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
