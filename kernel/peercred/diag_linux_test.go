package peercred

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
)

func addrPort(a net.Addr) netip.AddrPort { return netip.MustParseAddrPort(a.String()) }

// TestSocketCgroup finds the sender of a datagram and the client of a TCP
// connection, over IPv4 and IPv6, connected or not, with sock_diag.
func TestSocketCgroup(t *testing.T) {
	want := cgrouptest.OwnID(t)
	for _, host := range []string{"127.0.0.1", "::1"} {
		server, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Logf("no %s: %v", host, err)
			continue
		}
		defer server.Close()
		saddr := addrPort(server.LocalAddr())

		// Unconnected UDP (sendto), then connected UDP.
		unconnected, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer unconnected.Close()
		connected, err := net.Dial("udp", saddr.String())
		if err != nil {
			t.Fatal(err)
		}
		defer connected.Close()
		cases := map[string]netip.AddrPort{
			"udp unconnected": addrPort(unconnected.LocalAddr()),
			"udp connected":   addrPort(connected.LocalAddr()),
		}
		if host == "127.0.0.1" {
			// A dual-stack IPv6 socket ([::]:port) sending to an IPv4
			// address: the server sees 127.0.0.1.
			dual, err := net.ListenPacket("udp", ":0")
			if err != nil {
				t.Fatal(err)
			}
			defer dual.Close()
			cases["udp dual-stack"] = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), addrPort(dual.LocalAddr()).Port())
		}
		for name, c := range cases {
			got, err := SocketCgroup("udp", c, saddr)
			if err != nil || got != want {
				t.Errorf("%s %s: SocketCgroup = %d, %v, want %d", host, name, got, err, want)
			}
		}

		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		cc, err := net.DialTimeout("tcp", ln.Addr().String(), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		// The server sees the client at its RemoteAddr.
		got, err := SocketCgroup("tcp", addrPort(sc.RemoteAddr()), addrPort(sc.LocalAddr()))
		if err != nil || got != want {
			t.Errorf("%s tcp: SocketCgroup = %d, %v, want %d", host, got, err, want)
		}

		// No socket at a port nobody uses.
		gone, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		goneAddr := addrPort(gone.LocalAddr())
		gone.Close()
		if _, err := SocketCgroup("udp", goneAddr, saddr); !errors.Is(err, ErrNoSocket) {
			t.Errorf("%s udp closed socket: SocketCgroup error = %v, want %v", host, err, ErrNoSocket)
		}
	}
}

// FuzzParseDiag: sock_diag answers of any shape give an id or an error,
// never a panic.
func FuzzParseDiag(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Add(make([]byte, 200))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = parseDiag(b) })
}

// TestSocketOf finds the client's socket by its addresses and names it by
// the cookie the socket itself reports (SO_COOKIE), for UDP and TCP.
func TestSocketOf(t *testing.T) {
	server, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, proto := range []string{"udp", "tcp"} {
		srv := addrPort(server.LocalAddr())
		if proto == "tcp" {
			srv = addrPort(ln.Addr())
		}
		c, err := net.DialTimeout(proto, srv.String(), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		want := socketCookie(t, c.(syscall.Conn))
		got, err := SocketOf(proto, addrPort(c.LocalAddr()), srv)
		if err != nil || got.Cookie != want || got.UID != uint32(os.Getuid()) || got.Cgroup == 0 {
			t.Errorf("SocketOf(%s) = %+v, %v, want cookie %d uid %d and a cgroup", proto, got, err, want, os.Getuid())
		}
	}
}

// socketCookie is c's SO_COOKIE.
func socketCookie(t *testing.T, c syscall.Conn) (cookie uint64) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		var v uint64
		v, serr = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
		cookie = v
	}); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatalf("reading SO_COOKIE: %v", serr)
	}
	return cookie
}

// TestParseDiag reads the cookie, the uid and the cgroup id out of a
// sock_diag answer, and fails on a short or truncated one.
func TestParseDiag(t *testing.T) {
	ne := binary.NativeEndian
	msg := func(attrs ...[]byte) []byte {
		b := make([]byte, nlmsgHdrLen+inetDiagMsgLen)
		ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
		body := b[nlmsgHdrLen:]
		ne.PutUint32(body[44:], 0x89abcdef) // idiag_cookie, low word
		ne.PutUint32(body[48:], 0x01234567)
		ne.PutUint32(body[64:], 65534) // idiag_uid
		for _, a := range attrs {
			b = append(b, a...)
		}
		ne.PutUint32(b[0:], uint32(len(b)))
		return b
	}
	cgroupAttr := make([]byte, 12)
	ne.PutUint16(cgroupAttr[0:], 12)
	ne.PutUint16(cgroupAttr[2:], inetDiagCgroupID)
	ne.PutUint64(cgroupAttr[4:], 4711)
	tests := []struct {
		name    string
		b       []byte
		want    Socket
		wantErr bool
	}{
		{name: "with cgroup", b: msg(cgroupAttr), want: Socket{Cookie: 0x0123456789abcdef, UID: 65534, Cgroup: 4711}},
		{name: "without cgroup", b: msg(), want: Socket{Cookie: 0x0123456789abcdef, UID: 65534}},
		{name: "short", b: msg()[:nlmsgHdrLen+10], wantErr: true},
		{name: "bad attribute", b: msg(cgroupAttr[:6]), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDiag(tt.b)
			if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
				t.Errorf("parseDiag = %+v, %v, want %+v (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
