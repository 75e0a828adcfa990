package peercred

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Read returns the credentials of c's peer. With pidfd it also asks for a
// pidfd of the peer (Cred.Pidfd stays -1 on kernels without one).
func Read(c *net.UnixConn, pidfd bool) (Cred, error) {
	cr := Cred{Pidfd: -1}
	raw, err := c.SyscallConn()
	if err != nil {
		return cr, fmt.Errorf("reading peer credentials: %w", err)
	}
	var uerr error
	err = raw.Control(func(fd uintptr) {
		var u *unix.Ucred
		if u, uerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); uerr != nil {
			return
		}
		cr.Pid, cr.UID, cr.GID = u.Pid, u.Uid, u.Gid
		if !pidfd {
			return
		}
		if pfd, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
			unix.CloseOnExec(pfd)
			cr.Pidfd = pfd
		}
	})
	if err == nil {
		err = uerr
	}
	if err != nil {
		return cr, fmt.Errorf("reading peer credentials: %w", err)
	}
	if cr.Pid <= 0 {
		if cr.Pidfd >= 0 {
			unix.Close(cr.Pidfd)
			cr.Pidfd = -1
		}
		return cr, ErrNoPid
	}
	return cr, nil
}
