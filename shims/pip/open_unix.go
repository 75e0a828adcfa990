//go:build unix

package pip

import "syscall"

// openFlags open a file without blocking on a FIFO, so that the check
// can refuse it instead of waiting for a writer.
const openFlags = syscall.O_NONBLOCK
