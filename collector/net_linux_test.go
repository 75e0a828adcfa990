//go:build 386 || amd64 || arm64

package collector

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/dnsproxy/dnstest"
	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/policies/egress"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/test/netns"
	"github.com/sandtrail/sandtrail/test/testnet"
)

// The policy engine is what the daemon gives WithEgress.
var _ EgressPolicy = (*policies.Engine)(nil)

func init() {
	helperModes["net-get"] = helperNetGet
	helperModes["net-dial"] = helperNetDial
	helperModes["net-serve"] = helperNetServe
	helperModes["net-dns"] = helperNetDNS
	helperModes["net-sendn"] = helperNetSendN
	helperModes["net-hold"] = helperNetHold
}

// helperNetGet fetches args[0] with a fresh connection and prints the body
// length.
func helperNetGet(args []string) int {
	n, err := testnet.Get(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(n)
	return 0
}

// helperNetDial reads "tcp|udp ip port" lines from stdin and prints, for
// each, the errno of a non-blocking connect (tcp) or a sendto (udp) on a
// fresh socket, or OK. It runs only in a namespace of netns.New's, since
// what the policy allows is really sent.
func helperNetDial(args []string) int {
	if err := netns.Check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue
		}
		ip := netip.MustParseAddr(f[1])
		port, _ := strconv.Atoi(f[2])
		fmt.Println(dialErr(f[0], ip, port))
	}
	return 0
}

func dialErr(proto string, ip netip.Addr, port int) string {
	family := unix.AF_INET6
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: port, Addr: ip.As16()}
	if ip.Is4() {
		family = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: port, Addr: ip.As4()}
	}
	typ := unix.SOCK_STREAM
	if proto == "udp" {
		typ = unix.SOCK_DGRAM
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "socket: " + err.Error()
	}
	defer unix.Close(fd)
	if proto == "udp" {
		err = unix.Sendto(fd, []byte("x"), 0, sa)
	} else {
		err = unix.Connect(fd, sa)
	}
	if err == nil {
		return "OK"
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return unix.ErrnoName(en)
	}
	return err.Error()
}

// helperNetServe listens on args[0] ("127.0.0.1:0"), prints the port,
// accepts one connection, writes args[1] bytes, reads to EOF and prints
// how many bytes it read.
func helperNetServe(args []string) int {
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	conn, err := ln.Accept()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n, _ := strconv.Atoi(args[1])
	if _, err := conn.Write(make([]byte, n)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	got, _ := io.Copy(io.Discard, conn)
	conn.Close()
	ln.Close()
	fmt.Println(got)
	return 0
}

// helperNetDNS asks args[0] (the server, "ip:53") for args[1] (a name) over
// args[2]: "sendto" (unconnected UDP, checking the reply's source), "udp"
// (connected UDP) or "tcp". It prints the answer's first A record. It runs
// only in a namespace of netns.New's, so that a query the redirect missed
// goes nowhere.
func helperNetDNS(args []string) int {
	if err := netns.Check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	server, name, how := args[0], args[1], args[2]
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	var in *dns.Msg
	switch how {
	case "sendto":
		ap := netip.MustParseAddrPort(server)
		network := "udp4"
		if ap.Addr().Is6() {
			network = "udp6"
		}
		pc, err := net.ListenUDP(network, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer pc.Close()
		b, _ := m.Pack()
		if _, err := pc.WriteToUDPAddrPort(b, ap); err != nil {
			fmt.Fprintln(os.Stderr, "sendto:", err)
			return 1
		}
		pc.SetReadDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 4096)
		n, from, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "recvfrom:", err)
			return 1
		}
		if from.Addr().Unmap() != ap.Addr() || from.Port() != ap.Port() {
			fmt.Fprintf(os.Stderr, "reply from %s, want %s\n", from, ap)
			return 1
		}
		in = new(dns.Msg)
		if err := in.Unpack(buf[:n]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	default:
		c := &dns.Client{Net: how, Timeout: 30 * time.Second}
		co, err := c.Dial(server)
		if err != nil {
			fmt.Fprintln(os.Stderr, how, "dial:", err)
			return 1
		}
		defer co.Close()
		// Go takes the remote address from getpeername(2).
		if got := co.RemoteAddr().String(); got != server {
			fmt.Fprintf(os.Stderr, "getpeername = %s, want %s\n", got, server)
			return 1
		}
		if in, _, err = c.ExchangeWithConn(m, co); err != nil {
			fmt.Fprintln(os.Stderr, how, "exchange:", err)
			return 1
		}
	}
	for _, rr := range in.Answer {
		if a, ok := rr.(*dns.A); ok {
			fmt.Println(a.A)
			return 0
		}
	}
	fmt.Fprintln(os.Stderr, "no A record in", in)
	return 1
}

// helperCmd returns a command running the test binary in helper mode inside
// cg, as root.
func helperCmd(t *testing.T, cg *cgrouptest.Cgroup, mode string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.SysProcAttr = cg.SysProcAttr(t, -1)
	cmd.Stderr = os.Stderr
	return cmd
}

// liveRecorder collects a collector's events while the test runs.
type liveRecorder struct {
	c    *Collector
	mu   sync.Mutex
	evs  []*event.Event
	done chan struct{}
}

// startWatched skips without the kernel's support, starts a live recorder
// with opts and watches a new scratch cgroup as session sid.
func startWatched(t *testing.T, sid string, opts ...Option) (*cgrouptest.Cgroup, *liveRecorder) {
	t.Helper()
	requireKernel(t)
	cg := cgrouptest.New(t)
	r := startLive(t, opts...)
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatal(err)
	}
	return cg, r
}

func startLive(t *testing.T, opts ...Option) *liveRecorder {
	t.Helper()
	log := hclog.New(&hclog.LoggerOptions{Name: "test", Level: hclog.Warn, Output: os.Stderr})
	c, err := New(log, append([]Option{WithWakeup(0, 10*time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("New() = %v, want a collector", err)
	}
	r := &liveRecorder{c: c, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ev := range c.Events() {
			if err := ev.Validate(); err != nil {
				t.Errorf("event %+v: Validate() = %v", ev, err)
			}
			r.mu.Lock()
			r.evs = append(r.evs, ev)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		c.Close()
		<-r.done
	})
	return r
}

// wait polls for up to 20 s for an event matching f.
func (r *liveRecorder) wait(t *testing.T, what string, f func(*event.Event) bool) *event.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r.mu.Lock()
		for _, ev := range r.evs {
			if f(ev) {
				r.mu.Unlock()
				return ev
			}
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, ev := range r.evs {
				if ev.Net != nil {
					t.Logf("have %s %+v", ev.Kind, *ev.Net)
				}
			}
			t.Fatalf("no %s event within 20 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// all returns the events matching f.
func (r *liveRecorder) all(f func(*event.Event) bool) []*event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*event.Event
	for _, ev := range r.evs {
		if f(ev) {
			out = append(out, ev)
		}
	}
	return out
}

func netEvent(kind string, f func(n *event.Net) bool) func(*event.Event) bool {
	return func(ev *event.Event) bool { return ev.Kind == kind && ev.Net != nil && f(ev.Net) }
}

// TestNetConnectCloseBytes: a client in a watched cgroup fetches bodies of
// known size from a server in the test process; net.close counts the bytes
// the server really read and wrote.
func TestNetConnectCloseBytes(t *testing.T) {
	const sid = "sess-net-bytes"
	cg, r := startWatched(t, sid)
	for _, network := range []struct{ net, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		srv := testnet.StartServer(t, network.net, network.addr)
		port, host := srv.Port(), srv.IP()
		for _, size := range []int{1 << 20, 10 << 10} {
			t.Run(fmt.Sprintf("%s/%d", network.net, size), func(t *testing.T) {
				cmd := helperCmd(t, cg, "net-get", srv.URL(size))
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("client: %v", err)
				}
				if got := strings.TrimSpace(string(out)); got != strconv.Itoa(size) {
					t.Fatalf("client read %s bytes, want %d", got, size)
				}
				pid := cmd.Process.Pid
				conn := r.wait(t, "net.connect", func(ev *event.Event) bool {
					return ev.Kind == event.KindNetConnect && ev.Proc.Pid == int32(pid) && ev.Net.DstPort == port
				})
				if conn.SessionID != sid || conn.Net.DstIP != host.String() || conn.Net.Proto != "tcp" || conn.Net.Verdict != VerdictAllowed || conn.Net.Reason != "" {
					t.Errorf("net.connect = session %q %+v, want %s to %s:%d allowed", conn.SessionID, *conn.Net, sid, host, port)
				}
				cl := r.wait(t, "net.close", func(ev *event.Event) bool {
					return ev.Kind == event.KindNetClose && ev.Proc.Pid == int32(pid) && ev.Net.DstPort == port
				})
				cc := srv.Conn(cl.Net.SrcPort)
				if cc == nil {
					t.Fatalf("net.close %+v: no server connection from port %d", *cl.Net, cl.Net.SrcPort)
				}
				// The server closes after the response; wait for its
				// counts to settle.
				time.Sleep(100 * time.Millisecond)
				if !testnet.Within5(cl.Net.BytesIn, cc.BytesWritten()) || !testnet.Within5(cl.Net.BytesOut, cc.BytesRead()) {
					t.Errorf("net.close bytes in/out = %d/%d, server wrote/read %d/%d", cl.Net.BytesIn, cl.Net.BytesOut, cc.BytesWritten(), cc.BytesRead())
				}
				if cl.Net.SrcIP != host.String() || cl.SessionID != sid {
					t.Errorf("net.close = session %q %+v, want src %s", cl.SessionID, *cl.Net, host)
				}
			})
		}
		srv.Close()
	}
}

// TestNetListenAccept: a server in a watched cgroup accepts a connection
// from the test process, on an address and on a dual-stack wildcard; a
// connection to another process's listener on the same port and another
// address is not taken for the session's.
func TestNetListenAccept(t *testing.T) {
	const sid = "sess-net-accept"
	cg, r := startWatched(t, sid)
	for _, tt := range []struct{ listen, listenIP string }{{"127.0.0.1:0", "127.0.0.1"}, {":0", "::"}} {
		t.Run(tt.listen, func(t *testing.T) {
			const sent, recv = 300 << 10, 70 << 10
			cmd := helperCmd(t, cg, "net-serve", tt.listen, strconv.Itoa(sent))
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			br := bufio.NewReader(stdout)
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			port, _ := strconv.Atoi(strings.TrimSpace(line))
			if tt.listenIP == "127.0.0.1" {
				// A decoy outside the session on the same port.
				decoy, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.2:%d", port))
				if err != nil {
					t.Fatal(err)
				}
				dc, err := net.Dial("tcp4", decoy.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				ac, err := decoy.Accept()
				if err != nil {
					t.Fatal(err)
				}
				ac.Close()
				dc.Close()
				decoy.Close()
			}
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err != nil {
				t.Fatal(err)
			}
			if n, err := io.CopyN(io.Discard, conn, sent); err != nil || n != sent {
				t.Fatalf("read %d bytes: %v", n, err)
			}
			if _, err := conn.Write(make([]byte, recv)); err != nil {
				t.Fatal(err)
			}
			clientPort := uint16(conn.LocalAddr().(*net.TCPAddr).Port)
			conn.Close()
			io.Copy(io.Discard, br)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("server: %v", err)
			}
			pid := int32(cmd.Process.Pid)
			l := r.wait(t, "net.listen", netEvent(event.KindNetListen, func(n *event.Net) bool { return n.SrcPort == uint16(port) }))
			if l.Proc.Pid != pid || l.SessionID != sid || l.Net.SrcIP != tt.listenIP || l.Net.DstIP != "" {
				t.Errorf("net.listen = pid %d session %q %+v, want pid %d on %s", l.Proc.Pid, l.SessionID, *l.Net, pid, tt.listenIP)
			}
			a := r.wait(t, "net.accept", netEvent(event.KindNetAccept, func(n *event.Net) bool { return n.SrcPort == uint16(port) }))
			if a.Proc.Pid != pid || a.Net.DstPort != clientPort || a.Net.DstIP != "127.0.0.1" || a.Net.SrcIP != "127.0.0.1" || a.SessionID != sid {
				t.Errorf("net.accept = pid %d %+v, want pid %d from port %d", a.Proc.Pid, *a.Net, pid, clientPort)
			}
			cl := r.wait(t, "net.close", netEvent(event.KindNetClose, func(n *event.Net) bool { return n.SrcPort == uint16(port) && n.DstPort == clientPort }))
			if !testnet.Within5(cl.Net.BytesOut, sent) || !testnet.Within5(cl.Net.BytesIn, recv) {
				t.Errorf("net.close of the accepted connection: out/in = %d/%d, want %d/%d", cl.Net.BytesOut, cl.Net.BytesIn, sent, recv)
			}
			for _, ev := range r.all(netEvent(event.KindNetAccept, func(n *event.Net) bool { return n.SrcPort == uint16(port) })) {
				if ev.Net.SrcIP != "127.0.0.1" || ev.Net.DstPort != clientPort {
					t.Errorf("net.accept %+v: not the session's connection", *ev.Net)
				}
			}
			// The listener is closed: it leaves the listener tables, so
			// that a later listener on the port is not taken for it.
			var k netListenKey
			var v netConn
			for it := r.c.net.objs.Listeners.Iterate(); it.Next(&k, &v); {
				t.Errorf("listener %+v is still in the table after it closed", k)
			}
			var cookie uint64
			for it := r.c.net.objs.ListenerKeys.Iterate(); it.Next(&cookie, &k); {
				t.Errorf("listener key %+v is still in the table after it closed", k)
			}
			// Its port leaves the accept filter (the accept above
			// shows it was in it).
			var listening uint32
			if err := r.c.net.objs.ListenPorts.Lookup(uint32(port), &listening); err != nil || listening != 0 {
				t.Errorf("listen_ports[%d] = %d, %v after the listener closed, want 0", port, listening, err)
			}
		})
	}
}

// TestNetCloseRefused: a connection refused before it is established has a
// net.close with no source and no bytes (an established one's close names
// its local port, TestNetConnectCloseBytes).
func TestNetCloseRefused(t *testing.T) {
	cg, r := startWatched(t, "sess-net-refused")
	ns := netns.New(t)
	var port uint16
	ns.Do(func() {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = uint16(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	})
	res := dialAll(t, ns, cg, []dialCase{{"tcp", netip.MustParseAddr("127.0.0.1"), port}})
	if res[0] == "OK" {
		t.Fatalf("connect to closed port %d: OK", port)
	}
	ev := r.wait(t, "net.close", netEvent(event.KindNetClose, func(n *event.Net) bool { return n.DstPort == port }))
	if n := ev.Net; n.SrcIP != "" || n.SrcPort != 0 || n.BytesOut != 0 || n.BytesIn != 0 || n.DstIP != "127.0.0.1" {
		t.Errorf("net.close of a refused connection = %+v, want no source, no bytes, to 127.0.0.1", *n)
	}
}

// dialCase is one destination tried from a watched cgroup.
type dialCase struct {
	proto string
	ip    netip.Addr
	port  uint16
}

// dialAll tries every case from a helper in cg and in the namespace ns,
// and returns the results.
func dialAll(t *testing.T, ns *netns.NS, cg *cgrouptest.Cgroup, cases []dialCase) []string {
	t.Helper()
	var in strings.Builder
	for _, c := range cases {
		fmt.Fprintf(&in, "%s %s %d\n", c.proto, c.ip, c.port)
	}
	cmd := helperCmd(t, cg, "net-dial")
	cmd.Stdin = strings.NewReader(in.String())
	out, err := ns.Output(cmd)
	if err != nil {
		t.Fatalf("dialer: %v", err)
	}
	res := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(res) != len(cases) {
		t.Fatalf("dialer printed %d results for %d cases", len(res), len(cases))
	}
	return res
}

func newEngine(t *testing.T, yaml string) *policies.Engine {
	t.Helper()
	p, err := policies.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	e, err := policies.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestNetEgress: blocked ports and CIDRs fail with EPERM and are recorded
// as blocked, with the policy's reason; allowed destinations work, over
// IPv4 and IPv6.
func TestNetEgress(t *testing.T) {
	eng := newEngine(t, `
egress:
  default: allow
  blocked_ports: [9/tcp]
  blocked_cidrs: [127.0.0.2, "::2"]
`)
	const sid = "sess-net-egress"
	cg, r := startWatched(t, sid, WithEgress(eng))
	ns := netns.New(t)
	var ports []uint16
	for _, network := range []string{"tcp4", "tcp6"} {
		addr := "127.0.0.1:0"
		if network == "tcp6" {
			addr = "[::1]:0"
		}
		ns.Do(func() {
			ln := testnet.StartDropServer(t, network, addr)
			ports = append(ports, uint16(ln.Addr().(*net.TCPAddr).Port))
		})
	}
	v4, v6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	cases := []struct {
		dialCase
		blocked bool
	}{
		{dialCase{"tcp", v4, ports[0]}, false},
		{dialCase{"tcp", v6, ports[1]}, false},
		{dialCase{"tcp", v4, 9}, true},
		{dialCase{"tcp", v6, 9}, true},
		{dialCase{"udp", v4, 9}, false},
		{dialCase{"tcp", netip.MustParseAddr("127.0.0.2"), ports[0]}, true},
		{dialCase{"udp", netip.MustParseAddr("127.0.0.2"), 4000}, true},
		{dialCase{"tcp", netip.MustParseAddr("::2"), 80}, true},
		{dialCase{"udp", netip.MustParseAddr("::ffff:127.0.0.2"), 4000}, true},
		{dialCase{"udp", v6, 4000}, false},
	}
	var dc []dialCase
	for _, c := range cases {
		dc = append(dc, c.dialCase)
	}
	res := dialAll(t, ns, cg, dc)
	for i, c := range cases {
		if (res[i] == "EPERM") != c.blocked {
			t.Errorf("%s to %s port %d: %s, blocked %v", c.proto, c.ip, c.port, res[i], c.blocked)
		}
		if !c.blocked && c.proto == "tcp" && c.port != 9 && res[i] != "EINPROGRESS" && res[i] != "OK" {
			t.Errorf("%s to a listener at %s port %d: %s, want EINPROGRESS", c.proto, c.ip, c.port, res[i])
		}
		kind := event.KindNetConnect
		if c.proto == "udp" {
			kind = event.KindNetSend
		}
		ip := c.ip.Unmap().String()
		ev := r.wait(t, kind+" to "+ip, netEvent(kind, func(n *event.Net) bool {
			return n.DstIP == ip && n.DstPort == c.port && n.Proto == c.proto
		}))
		want := VerdictAllowed
		if c.blocked {
			want = VerdictBlocked
		}
		wantReason := ""
		if c.blocked {
			wantReason = eng.Egress("", c.ip, c.port, c.proto).Reason
		}
		if ev.Net.Verdict != want || ev.Net.Reason != wantReason || ev.SessionID != sid {
			t.Errorf("%s to %s port %d: verdict %q reason %q, want %q %q", kind, ip, c.port, ev.Net.Verdict, ev.Net.Reason, want, wantReason)
		}
	}
}

// TestNetEgressDifferential compares the kernel's verdict with
// Engine.Egress over many generated destinations, domains included.
func TestNetEgressDifferential(t *testing.T) {
	eng := newEngine(t, `
egress:
  default: block
  allowed_domains: [registry.npmjs.org, "*.github.com"]
  blocked_domains: [evil.github.com]
  allowed_cidrs: [10.0.0.0/8, "2001:db8::/32", 127.0.0.0/8, 0.0.0.0/30, "::1", "::/128"]
  blocked_cidrs: [169.254.169.254, 10.6.6.0/24, "2001:db8:bad::/48", 127.0.0.66, 0.0.0.1]
  allowed_ports: [443, 80/tcp, 8000-8100, 8443, 53/udp]
  blocked_ports: [25, 6000-6010/udp]
  doh_endpoints: [dns.google, 1.1.1.1, "2001:db8::1111", 10.1.9.9]
  doh_action: block
`)
	learned := map[netip.Addr]string{
		netip.MustParseAddr("104.16.0.1"):   "registry.npmjs.org",
		netip.MustParseAddr("140.82.0.5"):   "api.github.com",
		netip.MustParseAddr("140.82.0.6"):   "evil.github.com",
		netip.MustParseAddr("8.8.8.8"):      "dns.google",
		netip.MustParseAddr("10.2.0.1"):     "dns.google",
		netip.MustParseAddr("93.184.0.1"):   "example.com",
		netip.MustParseAddr("2606:4700::1"): "registry.npmjs.org",
		netip.MustParseAddr("10.6.6.7"):     "registry.npmjs.org",
	}
	ips := []string{"10.1.2.3", "10.6.6.6", "10.6.6.7", "169.254.169.254", "1.1.1.1", "1.1.1.2", "2001:db8::1", "2001:db8::1111",
		"2001:db8:bad::1", "2001:db9::1", "127.0.0.1", "127.0.0.66", "::ffff:10.1.2.3", "::ffff:169.254.169.254", "192.168.1.1",
		"10.1.9.9", "0.0.0.0", "0.0.0.1", "0.0.0.2", "0.1.2.3", "::", "::ffff:0.0.0.0", "::1"}
	egressDifferential(t, "sess-net-diff", eng, learned, ips)
}

// TestNetEgressDifferentialLoopback: with loopback blocked, the kernel
// blocks 0.0.0.0/8, :: and ::ffff:0.0.0.0 as Engine.Egress does.
func TestNetEgressDifferentialLoopback(t *testing.T) {
	eng := newEngine(t, `
egress:
  default: allow
  blocked_cidrs: [127.0.0.0/8, "::1"]
  doh_endpoints: ["::1", 1.1.1.1]
  doh_action: block
`)
	ips := []string{"0.0.0.0", "0.0.0.1", "0.1.2.3", "0.255.255.255", "::", "::ffff:0.0.0.0", "::ffff:0.1.2.3", "::2", "1.0.0.0", "1.1.1.1", "127.0.0.1", "::1"}
	egressDifferential(t, "sess-net-diff-lo", eng, nil, ips)
}

// egressDifferential dials ips (with learned domains) on many ports, and
// random addresses, from a session with eng's egress policy, and compares
// the kernel's verdicts with eng.Egress.
func egressDifferential(t *testing.T, sid string, eng *policies.Engine, learned map[netip.Addr]string, ips []string) {
	t.Helper()
	cg, r := startWatched(t, sid, WithEgress(eng))
	for ip, d := range learned {
		if err := r.c.LearnDomain(ip, d, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for ip := range learned {
		ips = append(ips, ip.String())
	}
	ports := []uint16{1, 22, 25, 53, 79, 80, 81, 443, 853, 5999, 6000, 6005, 6010, 6011, 7999, 8000, 8050, 8100, 8101, 8443}
	rng := rand.New(rand.NewPCG(7, 11))
	var cases []dialCase
	for _, s := range ips {
		for _, p := range ports {
			for _, proto := range []string{"tcp", "udp"} {
				cases = append(cases, dialCase{proto, netip.MustParseAddr(s), p})
			}
		}
	}
	for range 300 {
		var ip netip.Addr
		switch rng.IntN(4) {
		case 0:
			ip = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0x0b, 0xad, 0, byte(rng.IntN(2)), 9: byte(rng.IntN(256)), 15: 1})
		case 1:
			ip = netip.AddrFrom4([4]byte{0, byte(rng.IntN(2)), byte(rng.IntN(256)), byte(rng.IntN(4))})
		default:
			ip = netip.AddrFrom4([4]byte{10, byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))})
		}
		cases = append(cases, dialCase{[]string{"tcp", "udp"}[rng.IntN(2)], ip, uint16(1 + rng.IntN(65535))})
	}
	res := dialAll(t, netns.New(t), cg, cases)
	bad := 0
	for i, c := range cases {
		d := eng.Egress(learned[c.ip], c.ip, c.port, c.proto)
		if (res[i] == "EPERM") != (d.Verdict == policies.Block) {
			bad++
			if bad <= 20 {
				t.Errorf("%s to %s port %d (domain %q): kernel %s, Egress %s (%s)", c.proto, c.ip, c.port, learned[c.ip], res[i], d.Verdict, d.Reason)
			}
		}
	}
	t.Logf("%d cases, %d disagree", len(cases), bad)
	// Every connection of the dialer ended with it: none is left in the
	// connection table.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var k uint64
		var v netConn
		n := 0
		for it := r.c.net.objs.Conns.Iterate(); it.Next(&k, &v); {
			n++
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections left in the table after the dialer exited", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNetDNSRedirect: port-53 traffic of a watched cgroup reaches the
// session's DNS proxy over unconnected and connected UDP and TCP, for IPv4
// and IPv6 destinations, and the replies come from the original address.
func TestNetDNSRedirect(t *testing.T) {
	const sid = "sess-net-dns"
	cg, r := startWatched(t, sid)
	servers := []string{"192.0.2.53:53", "[2001:db8::53]:53"}
	hows := []string{"sendto", "udp", "tcp"}
	qname := func(server, how string) string { return fmt.Sprintf("q-%s-%d.example.", how, len(server)) }
	// The stand-ins for the session's proxy, on ::1 and 127.0.0.1, answer
	// every name the test asks with 203.0.113.7.
	zone := dnstest.Zone{}
	addName := func(name string) { zone[name] = []string{name + " 60 IN A 203.0.113.7"} }
	for _, server := range servers {
		for _, how := range hows {
			addName(qname(server, how))
		}
	}
	for _, how := range []string{"udp", "tcp"} {
		addName("mapped-" + how + ".example.")
	}
	// The queries' helpers and the proxies' stand-ins share a namespace of
	// their own: a query that the redirect missed is dropped there.
	ns := netns.New(t)
	var v4, v6 *dnstest.Server
	ns.Do(func() { v4, v6 = dnstest.Start(t, "127.0.0.1", zone), dnstest.Start(t, "::1", zone) })
	proxies := map[string]netip.AddrPort{"v4": netip.MustParseAddrPort(v4.Addr), "v6": netip.MustParseAddrPort(v6.Addr)}
	if err := r.c.RedirectDNS(cg.ID, proxies["v4"], proxies["v6"]); err != nil {
		t.Fatal(err)
	}
	if err := r.c.RedirectDNS(cg.ID, proxies["v6"], netip.AddrPort{}); err == nil {
		t.Error("RedirectDNS with an IPv6 address for IPv4 = nil, want an error")
	}
	for _, server := range servers {
		for _, how := range hows {
			name := qname(server, how)
			t.Run(server+"/"+how, func(t *testing.T) {
				out, err := ns.Output(helperCmd(t, cg, "net-dns", server, name, how))
				if err != nil {
					t.Fatalf("query %s over %s to %s: %v", name, how, server, err)
				}
				if got := strings.TrimSpace(string(out)); got != "203.0.113.7" {
					t.Errorf("answer = %q, want 203.0.113.7", got)
				}
				if v4.Count(name)+v6.Count(name) == 0 {
					t.Errorf("the proxy did not see %s", name)
				}
				ap := netip.MustParseAddrPort(server)
				kind := event.KindNetConnect
				if how == "sendto" {
					kind = event.KindNetSend
				}
				ev := r.wait(t, kind, netEvent(kind, func(n *event.Net) bool {
					return n.DstIP == ap.Addr().String() && n.DstPort == 53 && n.Proto == map[bool]string{true: "tcp", false: "udp"}[how == "tcp"]
				}))
				if ev.Net.Verdict != VerdictAllowed || !strings.Contains(ev.Net.Reason, "redirected") {
					t.Errorf("%s = %+v, want allowed and redirected", kind, *ev.Net)
				}
				checkDNSSender(t, r.c, ev.Proc)
			})
		}
	}
	// Without an IPv6 proxy, IPv6 queries of dual-stack sockets reach the
	// IPv4 proxy as a v4-mapped address.
	if err := r.c.RedirectDNS(cg.ID, proxies["v4"], netip.AddrPort{}); err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"udp", "tcp"} {
		name := "mapped-" + how + ".example."
		out, err := ns.Output(helperCmd(t, cg, "net-dns", "[2001:db8::53]:53", name, how))
		if err != nil || strings.TrimSpace(string(out)) != "203.0.113.7" {
			t.Errorf("query over %s to [2001:db8::53]:53 without an IPv6 proxy: %v %q", how, err, out)
		}
		if v4.Count(name) == 0 {
			t.Errorf("the IPv4 proxy did not see %s", name)
		}
	}
	// Unwatch clears the redirect.
	if err := r.c.Unwatch(cg.ID); err != nil {
		t.Fatal(err)
	}
	var v netDnsTarget
	if err := r.c.net.objs.DnsRedirect.Lookup(cg.ID, &v); err == nil {
		t.Error("the redirect outlived Unwatch")
	}
}

// checkDNSSender wants a sender of a redirected socket in the kernel's
// table with the pid of the redirected connect or send (want), and
// DNSSender to give its pid, uid and comm.
func checkDNSSender(t *testing.T, c *Collector, want *event.Proc) {
	t.Helper()
	var (
		cookie uint64
		s      netDnsSender
		found  bool
	)
	for it := c.net.objs.DnsSenders.Iterate(); it.Next(&cookie, &s); {
		if int32(s.Pid) == want.Pid {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("no dns_senders entry for pid %d", want.Pid)
	}
	got, ok := c.DNSSender(cookie)
	if !ok || got.Pid != want.Pid || got.UID == nil || want.UID == nil || *got.UID != *want.UID || got.Comm != want.Comm {
		t.Errorf("DNSSender(%d) = %+v, %v, want pid %d uid %v comm %q", cookie, got, ok, want.Pid, want.UID, want.Comm)
	}
	if _, ok := c.DNSSender(0); ok {
		t.Error("DNSSender(0) found a sender, want none")
	}
}

// TestNetLearnDomainExpires: a learned domain names its address in events
// and leaves the kernel table after its ttl.
func TestNetLearnDomainExpires(t *testing.T) {
	eng := newEngine(t, "egress:\n  blocked_domains: [blocked.example]\n")
	cg, r := startWatched(t, "sess-net-learn", WithEgress(eng))
	ip := netip.MustParseAddr("127.0.0.77")
	if err := r.c.LearnDomain(ip, "blocked.example", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := r.c.LearnDomain(netip.Addr{}, "x", time.Second); err == nil {
		t.Error("LearnDomain(invalid) = nil, want an error")
	}
	if res := dialAll(t, netns.New(t), cg, []dialCase{{"udp", ip, 4000}}); res[0] != "EPERM" {
		t.Fatalf("send to a blocked domain's address: %s, want EPERM", res[0])
	}
	ev := r.wait(t, "net.send", netEvent(event.KindNetSend, func(n *event.Net) bool { return n.DstIP == ip.String() }))
	if ev.Net.Domain != "blocked.example" || ev.Net.Verdict != VerdictBlocked || !strings.Contains(ev.Net.Reason, "domain is blocked") {
		t.Errorf("net.send = %+v, want domain blocked.example, blocked", *ev.Net)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if res := dialAll(t, netns.New(t), cg, []dialCase{{"udp", ip, 4000}}); res[0] != "EPERM" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the learned domain did not expire")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestNetSendMerged: repeated sends from one socket to one destination are
// recorded when their count reaches a power of two, each event standing for
// the sends since the previous one (net.count); another socket's sends are
// counted apart.
func TestNetSendMerged(t *testing.T) {
	cg, r := startWatched(t, "sess-net-merge")
	var pids []int32
	for range 2 {
		cmd := helperCmd(t, cg, "net-sendn", "127.0.0.1:4999", "50")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, int32(cmd.Process.Pid))
	}
	// 50 sends: records at the 1st, 2nd, 4th, 8th, 16th and 32nd, for
	// 1+1+2+4+8+16 = 32 sends.
	for _, pid := range pids {
		r.wait(t, "the 32nd net.send", func(ev *event.Event) bool {
			return ev.Kind == event.KindNetSend && ev.Proc.Pid == pid && ev.Net.Count == 16
		})
		var counts []uint64
		for _, ev := range r.all(func(ev *event.Event) bool { return ev.Kind == event.KindNetSend && ev.Proc.Pid == pid }) {
			c := ev.Net.Count
			if c == 0 {
				c = 1
			}
			counts = append(counts, c)
		}
		if fmt.Sprint(counts) != "[1 1 2 4 8 16]" {
			t.Errorf("net.send counts of pid %d = %v, want [1 1 2 4 8 16]", pid, counts)
		}
	}
}

// helperNetSendN sends args[1] datagrams to args[0] from one socket.
func helperNetSendN(args []string) int {
	n, _ := strconv.Atoi(args[1])
	pc, err := net.ListenUDP("udp4", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pc.Close()
	to := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(args[0]))
	for range n {
		if _, err := pc.WriteTo([]byte("x"), to); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func FuzzNetDecode(f *testing.F) {
	var r netNetEvent
	r.Hdr.Kind = uint32(processEventKindKIND_NET_CONNECT)
	r.Hdr.Ts = 1
	r.Proto = unix.IPPROTO_TCP
	r.Op = uint8(netNetOpNET_OP_CONNECT)
	r.Dst.Family = unix.AF_INET
	f.Add(append([]byte(nil), asBytes(&r)...))
	r.Hdr.Kind = uint32(processEventKindKIND_NET_CLOSE)
	r.Dst.Family = unix.AF_INET6
	r.Verdict = 9
	f.Add(append([]byte(nil), asBytes(&r)...))
	f.Add([]byte{7, 0, 0, 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := decoder{}
		ev, _, err := d.toEvent(raw)
		if err == nil && ev != nil && ev.Net != nil {
			if _, err := event.Marshal(ev); err != nil {
				t.Errorf("Marshal(%+v) = %v", ev, err)
			}
		}
	})
}

func TestNetDecode(t *testing.T) {
	mk := func(kind processEventKind, f func(r *netNetEvent)) []byte {
		var r netNetEvent
		r.Hdr.Kind = uint32(kind)
		r.Hdr.Ts = 3e9
		r.Hdr.Pid = 42
		r.Proto = unix.IPPROTO_TCP
		f(&r)
		return append([]byte(nil), asBytes(&r)...)
	}
	v4 := func(a *netNetAddr, ip string, port uint16) {
		*a = netNetAddr{Addr: addrWordsFamily(netip.MustParseAddr(ip)), Port: port, Family: unix.AF_INET}
	}
	v6 := func(a *netNetAddr, ip string, port uint16) {
		*a = netNetAddr{Addr: addrWordsFamily(netip.MustParseAddr(ip)), Port: port, Family: unix.AF_INET6}
	}
	tests := []struct {
		name    string
		raw     []byte
		want    string // kind and net fields
		wantErr bool
	}{
		{"connect", mk(processEventKindKIND_NET_CONNECT, func(r *netNetEvent) {
			r.Op = uint8(netNetOpNET_OP_CONNECT)
			v4(&r.Dst, "10.1.2.3", 443)
		}), "net.connect {connect tcp  0 10.1.2.3 443 allowed }", false},
		{"send blocked v6", mk(processEventKindKIND_NET_CONNECT, func(r *netNetEvent) {
			r.Op, r.Proto, r.Verdict = uint8(netNetOpNET_OP_SEND), unix.IPPROTO_UDP, uint8(netNetVerdictNET_BLOCK)
			v6(&r.Dst, "2001:db8::1", 53)
		}), "net.send {send udp  0 2001:db8::1 53 blocked }", false},
		{"unspecified names loopback", mk(processEventKindKIND_NET_CONNECT, func(r *netNetEvent) {
			r.Op, r.Proto, r.Verdict = uint8(netNetOpNET_OP_CONNECT), unix.IPPROTO_TCP, uint8(netNetVerdictNET_BLOCK)
			v4(&r.Dst, "0.0.0.0", 8080)
		}), "net.connect {connect tcp  0 127.0.0.1 8080 blocked }", false},
		{"v6 unspecified names loopback", mk(processEventKindKIND_NET_CONNECT, func(r *netNetEvent) {
			r.Op, r.Proto = uint8(netNetOpNET_OP_SEND), unix.IPPROTO_UDP
			v6(&r.Dst, "::", 8080)
		}), "net.send {send udp  0 ::1 8080 allowed }", false},
		{"redirected", mk(processEventKindKIND_NET_CONNECT, func(r *netNetEvent) {
			r.Op, r.Proto, r.Flags = uint8(netNetOpNET_OP_SEND), unix.IPPROTO_UDP, uint8(netNetFlagsNET_REDIRECTED)
			v4(&r.Dst, "192.0.2.53", 53)
		}), "net.send {send udp  0 192.0.2.53 53 allowed port 53: redirected to the session's DNS proxy}", false},
		{"close", mk(processEventKindKIND_NET_CLOSE, func(r *netNetEvent) {
			v4(&r.Src, "127.0.0.1", 4000)
			v4(&r.Dst, "127.0.0.1", 80)
			r.BytesIn, r.BytesOut, r.Start = 100, 20, 1e9
		}), "net.close {close tcp 127.0.0.1 4000 127.0.0.1 80  } in 100 out 20 2000 ms", false},
		{"listen drops the unset peer", mk(processEventKindKIND_NET_LISTEN, func(r *netNetEvent) {
			v6(&r.Src, "::1", 8080)
			v6(&r.Dst, "::", 0)
		}), "net.listen {listen tcp ::1 8080  0  }", false},
		{"bad op", mk(processEventKindKIND_NET_CONNECT, func(r *netNetEvent) { r.Op = 9 }), "", true},
		{"bad verdict", mk(processEventKindKIND_NET_CONNECT, func(r *netNetEvent) { r.Op, r.Verdict = 1, 7 }), "", true},
		{"bad proto", mk(processEventKindKIND_NET_ACCEPT, func(r *netNetEvent) { r.Proto = 1 }), "", true},
		{"bad family", mk(processEventKindKIND_NET_ACCEPT, func(r *netNetEvent) { r.Dst.Family = 3 }), "", true},
		{"short", mk(processEventKindKIND_NET_CLOSE, func(r *netNetEvent) {})[:60], "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decoder{}
			ev, _, err := d.toEvent(tt.raw)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("toEvent() = %+v, want an error", ev.Net)
				}
				return
			}
			if err != nil {
				t.Fatalf("toEvent() = %v", err)
			}
			n := ev.Net
			got := fmt.Sprintf("%s {%s %s %s %d %s %d %s %s}", ev.Kind, n.Op, n.Proto, n.SrcIP, n.SrcPort, n.DstIP, n.DstPort, n.Verdict, n.Reason)
			if ev.Kind == event.KindNetClose {
				got += fmt.Sprintf(" in %d out %d %d ms", n.BytesIn, n.BytesOut, n.DurationMS)
			}
			if got != tt.want || ev.Proc.Pid != 42 {
				t.Errorf("toEvent() = %s pid %d, want %s pid 42", got, ev.Proc.Pid, tt.want)
			}
			if err := ev.Validate(); err != nil {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}

// TestNetEgressFlag: a DoH endpoint with doh_action flag, by address or by
// name, is reached and recorded as flagged, with the policy's reason, on
// any port (8443 too) but plain DNS's.
func TestNetEgressFlag(t *testing.T) {
	eng := newEngine(t, "egress:\n  doh_endpoints: [127.0.0.3, doh.example]\n  doh_action: flag\n")
	cg, r := startWatched(t, "sess-net-flag", WithEgress(eng))
	byName := netip.MustParseAddr("127.0.0.4")
	if err := r.c.LearnDomain(byName, "doh.example", time.Hour); err != nil {
		t.Fatal(err)
	}
	cases := []dialCase{
		{"tcp", netip.MustParseAddr("127.0.0.3"), 443},
		{"udp", netip.MustParseAddr("127.0.0.3"), 853},
		{"tcp", byName, 443},
		{"tcp", netip.MustParseAddr("127.0.0.3"), 8443},
		{"tcp", byName, 8443},
		{"udp", netip.MustParseAddr("127.0.0.3"), 53},
	}
	res := dialAll(t, netns.New(t), cg, cases)
	for i, c := range cases {
		if res[i] == "EPERM" {
			t.Errorf("%s to %s port %d: EPERM, want it through", c.proto, c.ip, c.port)
		}
		kind := event.KindNetConnect
		if c.proto == "udp" {
			kind = event.KindNetSend
		}
		ev := r.wait(t, kind, netEvent(kind, func(n *event.Net) bool { return n.DstIP == c.ip.String() && n.DstPort == c.port }))
		want, reason := VerdictFlagged, "DNS-over-HTTPS"
		if c.port == 53 {
			want, reason = VerdictAllowed, ""
		}
		if ev.Net.Verdict != want || !strings.Contains(ev.Net.Reason, reason) || (reason == "") != (ev.Net.Reason == "") {
			t.Errorf("%s to %s port %d = %q %q, want %q with %q", kind, c.ip, c.port, ev.Net.Verdict, ev.Net.Reason, want, reason)
		}
	}
}

// TestNetHostWide: in host-wide mode the hooks sit on the v2 root and
// record processes outside every watched cgroup, without a session.
func TestNetHostWide(t *testing.T) {
	requireKernel(t)
	r := startLive(t, WithHostWide(true), WithQueueSize(1<<16))
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	ev := r.wait(t, "net.connect", netEvent(event.KindNetConnect, func(n *event.Net) bool { return n.DstPort == port }))
	if ev.Proc.Pid != int32(os.Getpid()) || ev.SessionID != "" || ev.Net.Verdict != VerdictAllowed {
		t.Errorf("net.connect = pid %d session %q %+v, want pid %d, no session, allowed", ev.Proc.Pid, ev.SessionID, *ev.Net, os.Getpid())
	}
	r.wait(t, "net.close", netEvent(event.KindNetClose, func(n *event.Net) bool { return n.DstPort == port }))
}

// TestNetTableLoss: connections that do not fit in the connection table
// are reported as lost net.close records.
func TestNetTableLoss(t *testing.T) {
	netConnsMax = 2
	defer func() { netConnsMax = 0 }()
	cg, r := startWatched(t, "sess-net-loss", WithLossInterval(50*time.Millisecond))
	netConnsMax = 0
	ln := testnet.StartDropServer(t, "tcp4", "127.0.0.1:0")
	// One helper holds 6 connections open at once (it exits after the
	// last dial, closing them).
	cmd := helperCmd(t, cg, "net-hold", ln.Addr().String(), "6")
	if err := cmd.Run(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	ev := r.wait(t, "collector.loss", func(ev *event.Event) bool {
		return ev.Kind == event.KindLoss && ev.Loss.Source == LossSourceTable
	})
	if ev.Loss.LostKind != event.KindNetClose || ev.Loss.Count == 0 {
		t.Errorf("loss = %+v, want lost net.close from kernel:table", *ev.Loss)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var lost uint64
		for _, l := range r.all(func(ev *event.Event) bool { return ev.Kind == event.KindLoss && ev.Loss.Source == LossSourceTable }) {
			lost += l.Loss.Count
		}
		closes := len(r.all(netEvent(event.KindNetClose, func(n *event.Net) bool { return n.DstIP == "127.0.0.1" })))
		if lost+uint64(closes) == 6 {
			if closes != 2 {
				t.Errorf("%d net.close for a table of 2", closes)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lost %d + closed %d, want 6", lost, closes)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// helperNetHold dials args[0] args[1] times, holding every connection open
// until the last is made.
func helperNetHold(args []string) int {
	n, _ := strconv.Atoi(args[1])
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
	return 0
}

func TestCIDRFlags(t *testing.T) {
	const (
		blocked = uint8(netCidrFlagsCIDR_BLOCKED)
		allowed = uint8(netCidrFlagsCIDR_ALLOWED)
		doh     = uint8(netCidrFlagsCIDR_DOH)
	)
	pfx := netip.MustParsePrefix
	tab := egress.Table{
		BlockedCIDRs: []netip.Prefix{pfx("10.0.0.0/8"), pfx("10.1.2.3/32")},
		AllowedCIDRs: []netip.Prefix{pfx("10.1.0.0/16"), pfx("10.1.2.3/32"), pfx("2001:db8::/32")},
		DoHAddrs:     []netip.Addr{netip.MustParseAddr("10.1.9.9"), netip.MustParseAddr("1.1.1.1")},
	}
	want := map[netip.Prefix]uint8{
		pfx("10.0.0.0/8"):  blocked,
		pfx("10.1.2.3/32"): blocked | allowed,
		pfx("10.1.0.0/16"): allowed | blocked,
		// A DoH address inherits the CIDR rules that contain it, not the
		// other way round.
		pfx("10.1.9.9/32"):   doh | blocked | allowed,
		pfx("1.1.1.1/32"):    doh,
		pfx("2001:db8::/32"): allowed,
		pfx("0.0.0.0/8"):     0,
		pfx("::/128"):        0,
	}
	checkCIDRFlags(t, tab, want)
}

// TestCIDRFlagsLoopback: entries within 0.0.0.0/8 and ::/128 are blocked
// or DoH when they or their loopback address are, allowed when both are.
func TestCIDRFlagsLoopback(t *testing.T) {
	const (
		blocked = uint8(netCidrFlagsCIDR_BLOCKED)
		allowed = uint8(netCidrFlagsCIDR_ALLOWED)
		doh     = uint8(netCidrFlagsCIDR_DOH)
	)
	pfx := netip.MustParsePrefix
	tab := egress.Table{
		BlockedCIDRs: []netip.Prefix{pfx("127.0.0.0/8"), pfx("0.1.0.0/16")},
		AllowedCIDRs: []netip.Prefix{pfx("0.0.0.0/0"), pfx("::1/128"), pfx("::/0")},
		DoHAddrs:     []netip.Addr{netip.MustParseAddr("::1"), netip.MustParseAddr("0.0.0.7")},
	}
	want := map[netip.Prefix]uint8{
		pfx("127.0.0.0/8"): blocked | allowed,
		pfx("0.0.0.0/0"):   allowed,
		pfx("::/0"):        allowed,
		pfx("::1/128"):     allowed | doh,
		// 127.0.0.1 is blocked, so all of 0.0.0.0/8 is.
		pfx("0.1.0.0/16"): blocked | allowed,
		pfx("0.0.0.7/32"): blocked | allowed | doh,
		pfx("0.0.0.0/8"):  blocked | allowed,
		// :: takes ::1's DoH flag.
		pfx("::/128"): allowed | doh,
	}
	checkCIDRFlags(t, tab, want)
	// ::'s own allowed flag is not enough without ::1's.
	tab.AllowedCIDRs = []netip.Prefix{pfx("0.0.0.0/0"), pfx("::/128")}
	delete(want, pfx("::/0"))
	want[pfx("::1/128")] = doh
	want[pfx("::/128")] = doh
	checkCIDRFlags(t, tab, want)
}

func checkCIDRFlags(t *testing.T, tab egress.Table, want map[netip.Prefix]uint8) {
	t.Helper()
	got := map[netip.Prefix]uint8{}
	for _, e := range cidrFlags(tab) {
		if _, dup := got[e.p]; dup {
			t.Errorf("cidrFlags() lists %s twice", e.p)
		}
		got[e.p] = e.flags
	}
	if !maps.Equal(got, want) {
		t.Errorf("cidrFlags() = %v, want %v", got, want)
	}
}

func TestPortFlags(t *testing.T) {
	tab := egress.Table{
		BlockedPorts: []egress.PortRange{{Lo: 25, Hi: 25}, {Lo: 1, Hi: 100, Proto: "udp"}},
		AllowedPorts: []egress.PortRange{{Lo: 443, Hi: 443, Proto: "tcp"}, {Lo: 53, Hi: 53, Proto: "udp"}},
	}
	keys, vals := portFlags(tab)
	if len(keys) != 65536 || len(vals) != 65536 {
		t.Fatalf("portFlags() has %d keys and %d values, want 65536 of each", len(keys), len(vals))
	}
	want := map[uint16]uint8{
		25:  uint8(netPortFlagsPORT_BLOCKED_TCP | netPortFlagsPORT_BLOCKED_UDP),
		53:  uint8(netPortFlagsPORT_BLOCKED_UDP | netPortFlagsPORT_ALLOWED_UDP),
		100: uint8(netPortFlagsPORT_BLOCKED_UDP),
		101: 0,
		443: uint8(netPortFlagsPORT_ALLOWED_TCP),
		0:   0,
	}
	for port, f := range want {
		if keys[port] != uint32(port) || vals[port] != f {
			t.Errorf("portFlags()[%d] = %d: %#x, want %d: %#x", port, keys[port], vals[port], port, f)
		}
	}
}
