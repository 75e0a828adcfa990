package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/test/netns"
	"github.com/sandtrail/sandtrail/test/testnet"
)

// netGetHelper fetches each URL with a fresh connection and prints
// "URL BYTES" for each.
func netGetHelper(args []string) int {
	for _, u := range args {
		n, err := testnet.Get(u)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(u, n)
	}
	return 0
}

// netDialHelper connects to each ADDR (host:port) and prints "ADDR OK" or
// "ADDR ERRNO". It runs only in a namespace of netns.New's (newNetEnv).
func netDialHelper(args []string) int {
	if err := netns.Check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	for _, a := range args {
		c, err := net.DialTimeout("tcp", a, 10*time.Second)
		if err == nil {
			c.Close()
			fmt.Println(a, "OK")
			continue
		}
		var en syscall.Errno
		if errors.As(err, &en) {
			fmt.Println(a, errnoName(en))
			continue
		}
		fmt.Println(a, err)
	}
	return 0
}

// TestRunNetBytes: an HTTP client in the session fetches known-size bodies
// from a loopback server; net.connect names the destination and pid, and
// net.close has bytes_in and bytes_out within 5% of what the server really
// wrote and read.
func TestRunNetBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := testnet.StartServer(t, "tcp4", "127.0.0.1:0")
	port := srv.Port()
	sizes := []int{1 << 20, 10 << 10}
	var urls []string
	for _, n := range sizes {
		urls = append(urls, srv.URL(n))
	}
	r := e.run(append([]string{"--user", "nobody", "--"}, helperCmd("netget", urls...)...)...)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\n%s", r.code, r.stderr)
	}
	for i, u := range urls {
		if !strings.Contains(r.stdout, fmt.Sprintf("%s %d", u, sizes[i])) {
			t.Errorf("the client did not read %d bytes from %s:\n%s", sizes[i], u, r.stdout)
		}
	}
	evs := e.events(r.summary.SessionID)
	pid := helperPid(t, evs, "netget")
	var connects int
	for _, ev := range kinds(evs, "net.connect") {
		if ev.Net.DstPort != port {
			continue
		}
		connects++
		if ev.Proc.Pid != pid || ev.Net.DstIP != "127.0.0.1" || ev.Net.Proto != "tcp" || ev.Net.Verdict != "allowed" {
			t.Errorf("net.connect = pid %d %+v, want pid %d to 127.0.0.1:%d tcp allowed", ev.Proc.Pid, *ev.Net, pid, port)
		}
	}
	if connects != len(sizes) {
		t.Errorf("%d net.connect events to port %d, want %d", connects, port, len(sizes))
	}
	var closes int
	for _, ev := range kinds(evs, "net.close") {
		if ev.Net.DstPort != port {
			continue
		}
		closes++
		cc := srv.Conn(ev.Net.SrcPort)
		if cc == nil {
			t.Errorf("net.close %+v: the server had no connection from port %d", *ev.Net, ev.Net.SrcPort)
			continue
		}
		if ev.Proc.Pid != pid || !testnet.Within5(ev.Net.BytesIn, cc.BytesWritten()) || !testnet.Within5(ev.Net.BytesOut, cc.BytesRead()) {
			t.Errorf("net.close pid %d bytes in/out = %d/%d, server wrote/read %d/%d (pid %d)", ev.Proc.Pid, ev.Net.BytesIn, ev.Net.BytesOut, cc.BytesWritten(), cc.BytesRead(), pid)
		}
	}
	if closes != len(sizes) {
		t.Errorf("%d net.close events to port %d, want %d", closes, port, len(sizes))
	}
	e.verify()
}

// TestRunNetEgress: an egress policy that blocks a port and a CIDR makes the
// connect fail with EPERM and records verdict blocked, while allowed
// destinations work, over IPv4 and IPv6 (::1).
func TestRunNetEgress(t *testing.T) {
	t.Parallel()
	e := newNetEnv(t)
	var v4, v6 *testnet.Server
	e.do(func() {
		v4, v6 = testnet.StartServer(t, "tcp4", "127.0.0.1:0"), testnet.StartServer(t, "tcp6", "[::1]:0")
	})
	pol := writePolicy(t, "egress:\n  blocked_ports: [9/tcp]\n  blocked_cidrs: [127.0.0.2, \"::2\"]\n")
	p4 := strconv.Itoa(int(v4.Port()))
	p6 := strconv.Itoa(int(v6.Port()))
	cases := []struct {
		addr, want, verdict string
	}{
		{"127.0.0.1:" + p4, "OK", "allowed"},
		{"[::1]:" + p6, "OK", "allowed"},
		{"127.0.0.1:9", "EPERM", "blocked"},
		{"[::1]:9", "EPERM", "blocked"},
		{"127.0.0.2:" + p4, "EPERM", "blocked"},
		{"[::2]:" + p6, "EPERM", "blocked"},
	}
	var addrs []string
	for _, c := range cases {
		addrs = append(addrs, c.addr)
	}
	r := e.run(append([]string{"--policy", pol, "--user", "nobody", "--"}, helperCmd("netdial", addrs...)...)...)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\n%s", r.code, r.stderr)
	}
	evs := e.events(r.summary.SessionID)
	pid := helperPid(t, evs, "netdial")
	for _, c := range cases {
		if !strings.Contains(r.stdout, c.addr+" "+c.want+"\n") {
			t.Errorf("connect to %s: want %s in the session output:\n%s", c.addr, c.want, r.stdout)
		}
		host, port, _ := net.SplitHostPort(c.addr)
		var found *event.Event
		for _, ev := range kinds(evs, "net.connect") {
			if ev.Net.DstIP == host && strconv.Itoa(int(ev.Net.DstPort)) == port {
				found = ev
				break
			}
		}
		if found == nil {
			t.Errorf("no net.connect to %s", c.addr)
			continue
		}
		if found.Net.Verdict != c.verdict || found.Proc.Pid != pid || (c.verdict == "blocked") != (found.Net.Reason != "") {
			t.Errorf("net.connect to %s = pid %d %+v, want pid %d verdict %s (with a reason when blocked)", c.addr, found.Proc.Pid, *found.Net, pid, c.verdict)
		}
	}
	e.verify()
}
