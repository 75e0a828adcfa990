package dns

import (
	"net/netip"
	"strings"
	"testing"

	mdns "github.com/miekg/dns"

	"github.com/sandtrail/sandtrail/collector/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/collector/session/peercred"
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
	p.sockCgroup = func(string, netip.AddrPort, netip.AddrPort) (uint64, error) { return 0, peercred.ErrNoSocket }
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
