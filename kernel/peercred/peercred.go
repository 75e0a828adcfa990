// Package peercred reads the kernel's account of who is at the other end
// of a socket: for a unix socket, the process's pid, uid and gid as
// SO_PEERCRED gives them when it connected, and a pidfd for it
// (SO_PEERPIDFD) where the kernel has one (Read); for a local TCP or UDP
// client, the cgroup its socket was created in, from sock_diag
// (SocketCgroup), and its socket's cookie, which names it in the
// collector's records (SocketOf).
//
// Trust model: these are the kernel's, not the peer's claims, so the
// servers that hold sessions' authority use them: the ingest socket
// attributes a shim's events to its session through the pid's cgroup, the
// control socket serves only uid 0, and the DNS proxy and the mirror
// attribute a client's requests to the session of its socket's cgroup. A pid can be recycled after its
// process exits; the pidfd, when there is one, cannot.
package peercred

import "errors"

// Cred is a peer's credentials.
type Cred struct {
	Pid      int32
	UID, GID uint32
	// Pidfd refers to the peer process, or is -1 when it was not asked for
	// or the kernel has no SO_PEERPIDFD. The caller closes it.
	Pidfd int
}

// ErrNotSupported is returned where unix sockets carry no peer
// credentials.
var ErrNotSupported = errors.New("peercred: peer credentials need linux")

// ErrNoPid is returned when the peer's pid is not visible here (it is in
// another pid namespace).
var ErrNoPid = errors.New("peercred: the peer has no pid here (in another pid namespace?)")

// ErrNoSocket means sock_diag found no socket for the addresses (its owner
// closed it already, say).
var ErrNoSocket = errors.New("peercred: no socket for the addresses")

// Socket is the kernel's account of a TCP or UDP socket of this host
// (SocketOf).
type Socket struct {
	// Cookie is the socket's cookie, as bpf_get_socket_cookie gives it.
	Cookie uint64
	// UID owns the socket (its creator's, or the one set with fchown).
	UID uint32
	// Cgroup is the id of the cgroup v2 the socket's creator ran in, or 0
	// when the kernel does not say.
	Cgroup uint64
}
