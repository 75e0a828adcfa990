package dnsproxy

import (
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/kernel/peercred"
	"github.com/sandtrail/sandtrail/record/event"
)

// TestSessionCgroupCheck: with WithCgroup, a session's listeners answer
// only queries from sockets of the session's cgroup. This process's
// sockets are in its own cgroup: the session with that cgroup is
// answered, the session with another is refused and the query recorded
// under the session that owns the sender's cgroup.
func TestSessionCgroupCheck(t *testing.T) {
	own := cgrouptest.OwnID(t)
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
	p.clients = attribution.New(listenerCgroups{p}, attribution.WithSocketLookup(func(string, netip.AddrPort, netip.AddrPort) (peercred.Socket, error) {
		return peercred.Socket{}, peercred.ErrNoSocket
	}))
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

// TestSender: with WithSender, each query's event names the process the
// sender gives for the cookie of the query's socket, which is the one
// sock_diag names for the client's addresses, with the socket's cgroup; a
// socket the sender does not know gives an event without a process.
func TestSender(t *testing.T) {
	own := cgrouptest.OwnID(t)
	up := startUpstream(t)
	rec := newRecorder()
	cookies := make(chan uint64, 4)
	var asked atomic.Int32
	p := newProxy(t, []string{up.Addr}, WithEmit(rec.emit), WithSender(func(cookie uint64) (event.Proc, bool) {
		cookies <- cookie
		known := asked.Add(1)%2 == 1 // every other query
		return event.Proc{Pid: 4242, Comm: "asker", UID: event.U32(7)}, known
	}))
	addr, _, err := p.AddSession("s")
	if err != nil {
		t.Fatal(err)
	}
	for _, proto := range []string{"udp", "tcp"} {
		c := &mdns.Client{Net: proto, Timeout: 30 * time.Second}
		conn, err := c.Dial(addr.String())
		if err != nil {
			t.Fatalf("dialing %s %s: %v", proto, addr, err)
		}
		defer conn.Close()
		sk, err := peercred.SocketOf(proto, addrPort(conn.LocalAddr()), addr)
		if err != nil {
			t.Fatalf("SocketOf(%s) = %v", proto, err)
		}
		for i, known := range []bool{true, false} {
			if _, _, err := c.ExchangeWithConn(query(fmt.Sprintf("q%d.example.", i), mdns.TypeA), conn); err != nil {
				t.Fatalf("exchange %s: %v", proto, err)
			}
			e := rec.next(t)
			if got := <-cookies; got != sk.Cookie {
				t.Errorf("%s: sender asked for cookie %d, want the client socket's %d", proto, got, sk.Cookie)
			}
			switch {
			case known && (e.Proc == nil || e.Proc.Pid != 4242 || e.Proc.Comm != "asker" || *e.Proc.UID != 7 || e.Proc.CgroupID != own):
				t.Errorf("%s: event proc %+v, want pid 4242 comm asker uid 7 cgroup %d", proto, e.Proc, own)
			case !known && e.Proc != nil:
				t.Errorf("%s unknown sender: event proc %+v, want none", proto, e.Proc)
			}
		}
	}
}
