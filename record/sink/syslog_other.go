//go:build !linux

package sink

import (
	"errors"
	"net"
)

// unackedBytes needs Linux's SIOCOUTQ: elsewhere a syslog sink cannot
// tell that the receiver's TCP stack acknowledged a batch, and every
// Write fails rather than claim it.
func unackedBytes(*net.TCPConn) (int, error) {
	return 0, errors.New("sink: a syslog sink needs Linux (SIOCOUTQ) to see its writes acknowledged")
}
