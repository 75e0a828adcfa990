package daemon

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// sockDiagAnswers asks the kernel's sock_diag for a dump of no sockets of
// family and protocol (protocol 0 for unix), to find out whether it has a
// handler for them: a kernel without the module (and none it can load)
// answers ENOENT. Asking loads a module that is installed, as the mirror's
// and the DNS proxy's first question would.
func sockDiagAnswers(family, protocol uint8) (bool, error) {
	ne := binary.NativeEndian
	// A netlink header, then inet_diag_req_v2 (56 bytes) or unix_diag_req
	// (24 bytes); both begin with the family and the protocol, and a zero
	// states mask matches no socket.
	size := 56
	if family == unix.AF_UNIX {
		size = 24
	}
	req := make([]byte, unix.SizeofNlMsghdr+size)
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], 1)
	req[unix.SizeofNlMsghdr], req[unix.SizeofNlMsghdr+1] = family, protocol
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return false, fmt.Errorf("opening sock_diag: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, fmt.Errorf("asking sock_diag: %w", err)
	}
	buf := make([]byte, 8192)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return false, fmt.Errorf("reading sock_diag: %w", err)
	}
	if n < unix.SizeofNlMsghdr {
		return false, errors.New("reading sock_diag: short answer")
	}
	// An error comes as NLMSG_ERROR, or, once the dump has begun, as the
	// NLMSG_DONE that ends it, each with the negative errno first.
	var code int32
	switch ne.Uint16(buf[4:]) {
	case unix.SOCK_DIAG_BY_FAMILY:
		return true, nil
	case unix.NLMSG_DONE, unix.NLMSG_ERROR:
		if n >= unix.SizeofNlMsghdr+4 {
			code = int32(ne.Uint32(buf[unix.SizeofNlMsghdr:]))
		}
	default:
		return false, fmt.Errorf("reading sock_diag: message type %d", ne.Uint16(buf[4:]))
	}
	switch errno := unix.Errno(-code); {
	case code == 0:
		return true, nil
	case errno == unix.ENOENT:
		return false, nil
	default:
		return false, fmt.Errorf("sock_diag: %w", errno)
	}
}

// The families and protocols that sockDiag asks about.
const (
	diagInet = unix.AF_INET
	diagUnix = unix.AF_UNIX
	diagTCP  = unix.IPPROTO_TCP
	diagUDP  = unix.IPPROTO_UDP
)
