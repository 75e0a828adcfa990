//go:build unix && !linux

package shims

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// raise ends the shim by sig, as the manager ended, as far as os/signal
// can: it sends sig to the shim after signal.Reset, and the Go runtime's
// handler ends the shim by SIGHUP, SIGINT or SIGTERM; SIGQUIT and SIGABRT
// end it with a goroutine dump, and other signals are swallowed. raise
// returns when sig did not end the shim.
func raise(sig syscall.Signal) {
	signal.Reset(sig)
	_ = syscall.Kill(os.Getpid(), sig)
	// The signal is delivered asynchronously.
	time.Sleep(time.Second)
}
