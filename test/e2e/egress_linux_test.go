package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/test/netns"
	"github.com/sandtrail/sandtrail/test/testnet"
)

// egressDialHelper takes "PROTO IP PORT" arguments and, for each, connects
// (tcp, non-blocking) or sends a datagram (udp) to IP:PORT from a fresh
// socket of the address's family, and prints "PROTO IP PORT RESULT": OK,
// EINPROGRESS or the errno's name. An IPv4-mapped address is dialed from
// an IPv6 socket. It runs only in a namespace of netns.New's (newNetEnv),
// since it dials addresses off loopback.
func egressDialHelper(args []string) int {
	if err := netns.Check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	for ; len(args) >= 3; args = args[3:] {
		port, _ := strconv.Atoi(args[2])
		res := egressDial(args[0], netip.MustParseAddr(args[1]), port)
		fmt.Println(args[0], args[1], args[2], res)
	}
	return 0
}

func egressDial(proto string, ip netip.Addr, port int) string {
	family := syscall.AF_INET6
	var sa syscall.Sockaddr = &syscall.SockaddrInet6{Port: port, Addr: ip.As16()}
	if ip.Is4() {
		family = syscall.AF_INET
		sa = &syscall.SockaddrInet4{Port: port, Addr: ip.As4()}
	}
	typ := syscall.SOCK_STREAM
	if proto == "udp" {
		typ = syscall.SOCK_DGRAM
	}
	fd, err := syscall.Socket(family, typ|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return "socket:" + err.Error()
	}
	defer syscall.Close(fd)
	if proto == "udp" {
		err = syscall.Sendto(fd, []byte("x"), 0, sa)
	} else {
		err = syscall.Connect(fd, sa)
	}
	var en syscall.Errno
	switch {
	case err == nil:
		return "OK"
	case errors.Is(err, syscall.EINPROGRESS):
		return "EINPROGRESS"
	case errors.As(err, &en):
		return errnoName(en)
	}
	return err.Error()
}

// egressListen listens for proto on a free port of lo (in the test's
// namespace) and counts what arrives: accepted connections or datagrams.
func egressListen(t *testing.T, proto string, lo netip.Addr) (uint16, *atomic.Int64) {
	t.Helper()
	addr := netip.AddrPortFrom(lo, 0).String()
	if proto == "tcp" {
		ln, n := testnet.StartCountingServer(t, "tcp", addr)
		return uint16(ln.Addr().(*net.TCPAddr).Port), n
	}
	var n atomic.Int64
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			n.Add(1)
		}
	}()
	return uint16(pc.LocalAddr().(*net.UDPAddr).Port), &n
}

// TestRunEgressUnspecified: with 127.0.0.0/8 and ::1
// blocked, a connect or a send by the unprivileged agent to 0.0.0.0, ::,
// ::ffff:0.0.0.0 or elsewhere in 0.0.0.0/8, which Linux takes to the local
// host, fails with EPERM, reaches none of the listeners on 127.0.0.1 and
// ::1, and is recorded as blocked, naming the loopback address: as dst_ip
// for the addresses the kernel connects to loopback, in the reason for all.
func TestRunEgressUnspecified(t *testing.T) {
	t.Parallel()
	e := newNetEnv(t)
	v4, v6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	cases := []struct {
		proto string
		dst   netip.Addr
		lo    netip.Addr // the listener's address
		dstIP string     // the recorded dst_ip
	}{
		{"tcp", netip.MustParseAddr("0.0.0.0"), v4, "127.0.0.1"},
		{"tcp", netip.MustParseAddr("::"), v6, "::1"},
		{"tcp", netip.MustParseAddr("::ffff:0.0.0.0"), v4, "127.0.0.1"},
		{"tcp", netip.MustParseAddr("0.1.2.3"), v4, "0.1.2.3"},
		{"udp", netip.MustParseAddr("0.0.0.0"), v4, "127.0.0.1"},
		{"udp", netip.MustParseAddr("::"), v6, "::1"},
		{"udp", netip.MustParseAddr("::ffff:0.0.0.0"), v4, "127.0.0.1"},
		{"udp", netip.MustParseAddr("0.1.2.3"), v4, "0.1.2.3"},
	}
	ports := make([]uint16, len(cases))
	counts := make([]*atomic.Int64, len(cases))
	e.do(func() {
		for i, c := range cases {
			ports[i], counts[i] = egressListen(t, c.proto, c.lo)
		}
	})
	pol := writePolicy(t, "egress:\n  default: allow\n  blocked_cidrs: [127.0.0.0/8, \"::1/128\"]\n")
	var args []string
	for i, c := range cases {
		args = append(args, c.proto, c.dst.String(), strconv.Itoa(int(ports[i])))
	}
	r := e.run(append([]string{"--policy", pol, "--user", "nobody", "--"}, helperCmd("egressdial", args...)...)...)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\n%s", r.code, r.stderr)
	}
	evs := e.events(r.summary.SessionID)
	pid := helperPid(t, evs, "egressdial")
	for i, c := range cases {
		line := fmt.Sprintf("%s %s %d ", c.proto, c.dst, ports[i])
		if !strings.Contains(r.stdout, line+"EPERM\n") {
			t.Errorf("%s: want EPERM in the session output:\n%s", line, r.stdout)
		}
		if n := counts[i].Load(); n != 0 {
			t.Errorf("%s: the listener on %s got %d connections or datagrams, want 0", line, c.lo, n)
		}
		kind := event.KindNetConnect
		if c.proto == "udp" {
			kind = event.KindNetSend
		}
		var found *event.Net
		for _, ev := range kinds(evs, kind) {
			if ev.Net.DstPort == ports[i] && ev.Net.Proto == c.proto && ev.Proc.Pid == pid {
				found = ev.Net
				break
			}
		}
		if found == nil {
			t.Errorf("%s: no %s to port %d by pid %d", line, kind, ports[i], pid)
			continue
		}
		if found.Verdict != "blocked" || found.DstIP != c.dstIP || !strings.Contains(found.Reason, "loopback "+c.lo.String()) {
			t.Errorf("%s: %s = %+v, want verdict blocked, dst_ip %s and a reason naming loopback %s", line, kind, *found, c.dstIP, c.lo)
		}
	}
	e.verify()
}
