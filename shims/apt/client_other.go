//go:build !unix

package apt

import (
	"errors"
	"os"
)

// ErrNotSupported is returned where unix sockets cannot pass fds.
var ErrNotSupported = errors.New("apt: the broker needs a unix system")

// RefusedError is returned by Broker when the broker refused the request.
type RefusedError struct{ Message string }

func (e *RefusedError) Error() string { return "apt broker refused: " + e.Message }

// Broker is not supported here.
func Broker(string, []string, *os.File, *os.File, *os.File) (int, error) { return 100, ErrNotSupported }
