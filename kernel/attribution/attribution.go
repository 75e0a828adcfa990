// Package attribution is the one step that says which session a socket's
// peer belongs to, by the kernel's account: for a unix socket, peer → pid
// (SO_PEERCRED, with a pidfd where the kernel has SO_PEERPIDFD) → the pid's
// v2 cgroup (/proc/PID/cgroup) → the session registered for that cgroup or
// for its nearest ancestor that has one; for a local TCP or UDP client,
// the cgroup its socket was created in (sock_diag) → the session registered
// for it. The daemon builds one Attributor over its session table and hands
// it to every server that decides by session: the ingest socket and the
// apt broker (Open, Attribute), the control socket (Unix: root outside
// every session only), the mirror (Socket, over the session manager) and
// the DNS proxy (Socket, over its own listeners' cgroups).
//
// Trust model. Everything an Attributor reads is the kernel's: the peer's
// credentials as they were when it connected, the cgroup its pid runs in
// now, the cgroup its socket was created in. Nothing comes from the peer's
// bytes. A process of a session cannot leave the session's cgroup (it
// cannot write a cgroup.procs outside its own subtree), so the cgroup names
// the session. A pid, however, can be recycled once its process exits: a
// connection handed to a process of another session, or kept past the
// connecting process's exit, would otherwise be attributed to whoever holds
// the pid now. Attribute therefore checks, after it has read the pid's
// cgroup, that the pid still names the process that connected: by the
// pidfd taken at Open (exact), or, on kernels without SO_PEERPIDFD, by the
// process start time read at Open (a pid recycled within the same clock
// tick, or between the connect and Open, goes unnoticed; docs/ingest.md).
// A peer that fails the check is ErrPeerGone, and every caller refuses it:
// the step fails closed. A socket's cgroup (Socket) is fixed when the
// socket is created and names no pid, so it has no such race; sock_diag
// only answers for sockets of this host's network namespace.
//
// Where the host has no cgroup v2 hierarchy, no peer is in a session: an
// Attribution then has no Session, and callers serve only what they serve
// to peers outside every session (the ingest socket: root alone).
package attribution

import (
	"errors"
	"net/netip"

	"github.com/sandtrail/sandtrail/kernel/cgroup"
	"github.com/sandtrail/sandtrail/kernel/peercred"
)

// Sessions maps a v2 cgroup id to the session that owns that cgroup. The
// session manager registers each session's cgroup (and the cgroups nested
// in it); Attribute walks up from the peer's cgroup, so a descendant
// cgroup belongs to its ancestor's session.
type Sessions interface {
	Lookup(cgroupID uint64) (sessionID string, ok bool)
}

// ErrPeerGone is returned when the process that connected has exited, so
// its pid can no longer be trusted to name it.
var ErrPeerGone = errors.New("attribution: peer process has exited")

// ErrNoCgroup is returned by Socket when the kernel names no cgroup for
// a socket (a kernel without INET_DIAG_CGROUP_ID).
var ErrNoCgroup = errors.New("reading sock_diag: no cgroup id (kernel without INET_DIAG_CGROUP_ID)")

// Attribution is who is at the other end of a unix socket, as the kernel
// says.
type Attribution struct {
	Pid int32
	// UID is the peer's uid when it connected.
	UID uint32
	// CgroupID is the id of the peer's v2 cgroup, 0 without a v2
	// hierarchy.
	CgroupID uint64
	// Session is the session that owns the cgroup, empty outside every
	// session.
	Session string
}

// Client is the kernel's account of a local TCP or UDP client (Socket).
type Client struct {
	// Socket is the client's socket: its cookie, owner and cgroup.
	Socket peercred.Socket
	// Session is the session registered for the socket's cgroup, empty
	// when none is.
	Session string
}

// Attributor attributes peers to sessions (see the package doc).
type Attributor struct {
	sessions Sessions
	mount    cgroup.Mount
	mountErr error // no v2 hierarchy: nobody is in a session
	noPidfd  bool
	sockOf   func(proto string, client, server netip.AddrPort) (peercred.Socket, error)
}

// Option configures an Attributor.
type Option func(*Attributor)

// WithMount sets where the v2 hierarchy is mounted, instead of reading
// /proc/self/mountinfo.
func WithMount(m cgroup.Mount) Option { return func(a *Attributor) { a.mount, a.mountErr = m, nil } }

// WithoutPidfd checks peers by their start time alone, as on kernels
// without SO_PEERPIDFD (a test hook).
func WithoutPidfd() Option { return func(a *Attributor) { a.noPidfd = true } }

// WithSocketLookup replaces sock_diag (peercred.SocketOf) in Socket: a
// test hook for a socket the kernel cannot be made to show.
func WithSocketLookup(f func(proto string, client, server netip.AddrPort) (peercred.Socket, error)) Option {
	return func(a *Attributor) { a.sockOf = f }
}

// New returns an Attributor that looks sessions up in sessions. It reads
// the v2 hierarchy's mount; without one it still works, and then no peer
// is in a session (MountErr says why).
func New(sessions Sessions, opts ...Option) *Attributor {
	a := &Attributor{sessions: sessions, sockOf: peercred.SocketOf}
	a.mount, a.mountErr = cgroup.ReadV2()
	for _, o := range opts {
		o(a)
	}
	return a
}

// MountErr is why no peer can be in a session (the host has no cgroup v2
// hierarchy), or nil.
func (a *Attributor) MountErr() error { return a.mountErr }

// Socket attributes the client of a conversation over proto ("udp" or
// "tcp") between client and server, both addresses of this host's network
// namespace: its socket (peercred.SocketOf) and the session registered for
// the socket's cgroup. It returns peercred.ErrNoSocket when the kernel has
// no such socket, and ErrNoCgroup, with the socket, when the kernel names
// no cgroup for it.
func (a *Attributor) Socket(proto string, client, server netip.AddrPort) (Client, error) {
	sk, err := a.sockOf(proto, client, server)
	if err != nil {
		return Client{}, err
	}
	c := Client{Socket: sk}
	if sk.Cgroup == 0 {
		// The socket is found, and names its process, but not its
		// session.
		return c, ErrNoCgroup
	}
	c.Session, _ = a.sessions.Lookup(sk.Cgroup)
	return c, nil
}

// lookup returns the session of the nearest cgroup of ids (nearest first)
// that one is registered for.
func (a *Attributor) lookup(ids []uint64) string {
	for _, id := range ids {
		if sid, ok := a.sessions.Lookup(id); ok {
			return sid
		}
	}
	return ""
}
