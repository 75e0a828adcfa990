package peercred

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Layout of the sock_diag messages (linux/inet_diag.h).
const (
	inetDiagReqV2Len = 56 // struct inet_diag_req_v2
	inetDiagMsgLen   = 72 // struct inet_diag_msg
	inetDiagCgroupID = 21 // INET_DIAG_CGROUP_ID, a u64 attribute
	nlmsgHdrLen      = unix.SizeofNlMsghdr
)

// SocketCgroup returns the id of the cgroup v2 that the creator of the
// client's socket (SocketOf) ran in. It returns ErrNoSocket when there is
// no such socket, and an error when the kernel does not say.
func SocketCgroup(proto string, client, server netip.AddrPort) (uint64, error) {
	s, err := SocketOf(proto, client, server)
	if err != nil {
		return 0, err
	}
	if s.Cgroup == 0 {
		return 0, errors.New("reading sock_diag: no cgroup id (kernel without INET_DIAG_CGROUP_ID)")
	}
	return s.Cgroup, nil
}

// SocketOf asks the kernel (sock_diag) which socket is the client of a
// conversation over proto ("udp" or "tcp") between client and server, a
// socket of this host: for a datagram, its sender; for a TCP connection,
// its connecting end. Both addresses are in the caller's network
// namespace. It returns ErrNoSocket when there is no such socket.
func SocketOf(proto string, client, server netip.AddrPort) (Socket, error) {
	client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
	server = netip.AddrPortFrom(server.Addr().Unmap(), server.Port())
	if client.Addr().Is4() != server.Addr().Is4() {
		return Socket{}, fmt.Errorf("looking up the client's socket: %v and %v are of different families", client, server)
	}
	req := make([]byte, nlmsgHdrLen+inetDiagReqV2Len)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // sequence
	r := req[nlmsgHdrLen:]
	r[0] = unix.AF_INET6
	if client.Addr().Is4() {
		r[0] = unix.AF_INET
	}
	// The socket to find is the client's. TCP looks a socket up by its own
	// (source) and its peer's (destination) address; UDP the other way
	// round ("src and dst are swapped for historical reasons",
	// net/ipv4/udp_diag.c).
	src, dst := client, server
	switch proto {
	case "tcp":
		r[1] = unix.IPPROTO_TCP
	case "udp":
		r[1] = unix.IPPROTO_UDP
		src, dst = server, client
	default:
		return Socket{}, fmt.Errorf("looking up the client's socket: protocol %q", proto)
	}
	ne.PutUint32(r[4:], ^uint32(0)) // every state
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], src.Port())
	binary.BigEndian.PutUint16(id[2:], dst.Port())
	s, d := src.Addr().As16(), dst.Addr().As16()
	if client.Addr().Is4() {
		copy(id[4:], s[12:])
		copy(id[20:], d[12:])
	} else {
		copy(id[4:], s[:])
		copy(id[20:], d[:])
	}
	ne.PutUint32(id[40:], ^uint32(0)) // INET_DIAG_NOCOOKIE
	ne.PutUint32(id[44:], ^uint32(0))

	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return Socket{}, fmt.Errorf("opening sock_diag: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return Socket{}, fmt.Errorf("asking sock_diag: %w", err)
	}
	buf := make([]byte, 8192)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return Socket{}, fmt.Errorf("reading sock_diag: %w", err)
	}
	return parseDiag(buf[:n])
}

// parseDiag reads the socket out of sock_diag's answer to one exact
// lookup.
func parseDiag(b []byte) (Socket, error) {
	ne := binary.NativeEndian
	if len(b) < nlmsgHdrLen {
		return Socket{}, errors.New("reading sock_diag: short answer")
	}
	l, typ := ne.Uint32(b[0:]), ne.Uint16(b[4:])
	if l < nlmsgHdrLen || int(l) > len(b) {
		return Socket{}, errors.New("reading sock_diag: bad message length")
	}
	body := b[nlmsgHdrLen:l]
	switch typ {
	case unix.NLMSG_ERROR:
		if len(body) < 4 {
			return Socket{}, errors.New("reading sock_diag: short error")
		}
		errno := unix.Errno(-int32(ne.Uint32(body)))
		if errno == unix.ENOENT {
			return Socket{}, ErrNoSocket
		}
		return Socket{}, fmt.Errorf("sock_diag: %w", errno)
	case unix.SOCK_DIAG_BY_FAMILY:
	default:
		return Socket{}, fmt.Errorf("reading sock_diag: message type %d", typ)
	}
	if len(body) < inetDiagMsgLen {
		return Socket{}, errors.New("reading sock_diag: short socket message")
	}
	s := Socket{
		// idiag_cookie: two u32 words, the low one first.
		Cookie: uint64(ne.Uint32(body[44:])) | uint64(ne.Uint32(body[48:]))<<32,
		UID:    ne.Uint32(body[64:]),
	}
	for a := body[inetDiagMsgLen:]; len(a) >= 4; {
		al, at := int(ne.Uint16(a[0:])), ne.Uint16(a[2:])&0x3fff // without NLA_F_NESTED, NLA_F_NET_BYTEORDER
		if al < 4 || al > len(a) {
			return Socket{}, errors.New("reading sock_diag: bad attribute length")
		}
		if at == inetDiagCgroupID && al >= 12 {
			s.Cgroup = ne.Uint64(a[4:])
			return s, nil
		}
		next := (al + 3) &^ 3
		if next > len(a) {
			break
		}
		a = a[next:]
	}
	return s, nil
}
