package dns

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/sandtrail/sandtrail/collector/cgroup"
)

// ownCgroupID is the id of this process's cgroup v2, or skips the test.
func ownCgroupID(t *testing.T) uint64 {
	t.Helper()
	dir, err := cgroup.OwnDir()
	if err != nil {
		t.Skipf("no own cgroup v2: %v", err)
	}
	id, err := cgroup.ID(dir)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestSocketCgroup finds the sender of a datagram and the client of a TCP
// connection, over IPv4 and IPv6, connected or not, with sock_diag.
func TestSocketCgroup(t *testing.T) {
	want := ownCgroupID(t)
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
			got, err := socketCgroup("udp", c, saddr)
			if err != nil || got != want {
				t.Errorf("%s %s: socketCgroup = %d, %v, want %d", host, name, got, err, want)
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
		got, err := socketCgroup("tcp", addrPort(sc.RemoteAddr()), addrPort(sc.LocalAddr()))
		if err != nil || got != want {
			t.Errorf("%s tcp: socketCgroup = %d, %v, want %d", host, got, err, want)
		}

		// No socket at a port nobody uses.
		gone, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		goneAddr := addrPort(gone.LocalAddr())
		gone.Close()
		if _, err := socketCgroup("udp", goneAddr, saddr); !errors.Is(err, errNoSocket) {
			t.Errorf("%s udp closed socket: socketCgroup error = %v, want %v", host, err, errNoSocket)
		}
	}
}

// TestSessionCgroupCheck: with WithCgroup, a session's listeners answer
// only queries from sockets of the session's cgroup. This process's
// sockets are in its own cgroup: the session with that cgroup is
// answered, the session with another is refused and the query recorded
// under the session that owns the sender's cgroup.
func TestSessionCgroupCheck(t *testing.T) {
	own := ownCgroupID(t)
	if err := CheckSocketLookup(); err != nil {
		t.Fatalf("CheckSocketLookup() = %v", err)
	}
	up := startUpstream(t)
	rec := newRecorder()
	p := newProxy(t, []string{up.Addr}, WithEmit(rec.emit))
	mine, _, err := p.AddSession("mine", WithCgroup(own))
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := p.AddSession("other", WithCgroup(own^0x5a5a))
	if err != nil {
		t.Fatal(err)
	}
	for _, proto := range []string{"udp", "tcp"} {
		resp, _ := exchangeAt(t, mine, proto, query("a.example.", mdns.TypeA))
		if resp.Rcode != mdns.RcodeSuccess || len(resp.Answer) != 1 {
			t.Errorf("%s own session: rcode %s answers %q, want NOERROR and one", proto, rcodeString(resp.Rcode), rrStrings(resp.Answer))
		}
		if e := rec.next(t); e.SessionID != "mine" || e.Net.Verdict != "allowed" {
			t.Errorf("%s own session: event session %q verdict %q, want mine, allowed", proto, e.SessionID, e.Net.Verdict)
		}

		before := up.Count("v6.example.")
		resp, _ = exchangeAt(t, other, proto, query("v6.example.", mdns.TypeAAAA))
		if resp.Rcode != mdns.RcodeRefused {
			t.Errorf("%s other session's listener: rcode %s, want REFUSED", proto, rcodeString(resp.Rcode))
		}
		if up.Count("v6.example.") != before {
			t.Errorf("%s other session's listener: the query went upstream", proto)
		}
		e := rec.next(t)
		if e.SessionID != "mine" || e.Net.Verdict != "blocked" || e.Net.DNS.RCode != "REFUSED" ||
			!strings.Contains(e.Net.Reason, "session other") {
			t.Errorf("%s other session's listener: event session %q verdict %q rcode %q reason %q, want mine, blocked, REFUSED, naming session other",
				proto, e.SessionID, e.Net.Verdict, e.Net.DNS.RCode, e.Net.Reason)
		}
	}
	if st := p.Stats(); st.Foreign != 2 || st.Unverified != 0 {
		t.Errorf("Stats() = %+v, want Foreign 2, Unverified 0", st)
	}

	// A sender that cannot be found (it closed its socket at once) is
	// refused and recorded under no session.
	p = newProxy(t, []string{up.Addr}, WithEmit(rec.emit))
	p.sockCgroup = func(string, netip.AddrPort, netip.AddrPort) (uint64, error) { return 0, errNoSocket }
	if mine, _, err = p.AddSession("mine", WithCgroup(own)); err != nil {
		t.Fatal(err)
	}
	resp, _ := exchangeAt(t, mine, "udp", query("a.example.", mdns.TypeA))
	if resp.Rcode != mdns.RcodeRefused {
		t.Errorf("unverified sender: rcode %s, want REFUSED", rcodeString(resp.Rcode))
	}
	if e := rec.next(t); e.SessionID != "" || e.Net.Verdict != "blocked" || !strings.Contains(e.Net.Reason, "session mine") {
		t.Errorf("unverified sender: event session %q verdict %q reason %q, want none, blocked, naming session mine", e.SessionID, e.Net.Verdict, e.Net.Reason)
	}
	if st := p.Stats(); st.Unverified != 1 {
		t.Errorf("Stats().Unverified = %d, want 1", st.Unverified)
	}
}
