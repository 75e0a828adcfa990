package sink

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// unackedBytes is what the socket holds that the peer's TCP stack has not
// acknowledged: its unsent and unacknowledged bytes (SIOCOUTQ, Linux's
// TIOCOUTQ on a TCP socket). A socket no longer established (the peer
// closed or reset it) is an error.
func unackedBytes(c *net.TCPConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var info *unix.TCPInfo
	var ierr error
	err = raw.Control(func(fd uintptr) {
		if info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); ierr != nil {
			return
		}
		n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
	})
	if err = errors.Join(err, ierr); err != nil {
		return 0, fmt.Errorf("reading the socket's queue: %w", err)
	}
	if info.State != unix.BPF_TCP_ESTABLISHED {
		return 0, fmt.Errorf("the connection is no longer established (TCP state %d)", info.State)
	}
	return n, nil
}
