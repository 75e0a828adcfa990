package bench

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain runs the benchmarks, or, in a child started by
// ioStartHTTPServer, the loopback HTTP benchmark's server, or, in one started
// by BenchmarkCollectorSyscalls, a loop of syscalls.
//
// Around the benchmarks it makes the test process a child subreaper, so
// that the orphans of whatever the benchmarks start (an nginx worker whose
// master was killed, a daemon's children) become its children rather than
// init's; and after them it fails the run if any process that the
// benchmarks started is still running (checkNoServersLeft). An interrupt
// kills the servers' process groups before the process exits.
func TestMain(m *testing.M) {
	if os.Getenv(ioServeEnv) != "" {
		ioServe()
	}
	if os.Getenv(sysLoopEnv) != "" {
		sysLoop()
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "bench: PR_SET_CHILD_SUBREAPER: %v\n", err)
		os.Exit(1)
	}
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-interrupted
		killStartedGroups()
		fmt.Fprintf(os.Stderr, "bench: %v: killed the servers' process groups\n", sig)
		os.Exit(2)
	}()
	code := m.Run()
	if !checkNoServersLeft() {
		fmt.Fprintln(os.Stderr, "bench: FAIL: the benchmarks left processes running (above)")
		code = 1
	}
	os.Exit(code)
}
