package shims

import (
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// raise ends the shim by sig, with sig's default action, as the manager
// ended. os/signal cannot give sig its default back: signal.Reset leaves
// the Go runtime's handler, which prints a goroutine dump and exits 2 for
// SIGQUIT and SIGABRT and swallows SIGUSR1 or SIGPIPE, and a signal the
// shim was started with ignored stays ignored. raise therefore sets
// SIG_DFL itself and sends sig to its own thread, which acts on it before
// the kill returns. The shim dumps no core of its own: it would replace
// the manager's core file in the same directory. raise returns only when
// sig did not end the shim: its thread blocks sig, or the kernel refused
// the disposition.
func raise(sig syscall.Signal) {
	runtime.LockOSThread()
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	// A kernel struct sigaction of zeros is SIG_DFL, no flags, an empty
	// mask. 8 is the size of the kernel's sigset_t (16 on MIPS, where the
	// call fails and the shim exits 128+signal).
	var dfl [4]uint64
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig),
		uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0); errno != 0 {
		return
	}
	_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), sig)
}
