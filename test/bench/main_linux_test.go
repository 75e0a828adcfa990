package bench

import (
	"os"
	"testing"
)

// TestMain runs the benchmarks, or, in a child started by
// ioStartHTTPServer, the loopback HTTP benchmark's server.
func TestMain(m *testing.M) {
	if os.Getenv(ioServeEnv) != "" {
		ioServe()
	}
	os.Exit(m.Run())
}
