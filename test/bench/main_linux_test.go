package bench

import (
	"os"
	"testing"
)

// TestMain runs the benchmarks, or, in a child started by
// ioStartHTTPServer, the loopback HTTP benchmark's server, or, in one started
// by BenchmarkCollectorSyscalls, a loop of syscalls.
func TestMain(m *testing.M) {
	if os.Getenv(ioServeEnv) != "" {
		ioServe()
	}
	if os.Getenv(sysLoopEnv) != "" {
		sysLoop()
	}
	os.Exit(m.Run())
}
