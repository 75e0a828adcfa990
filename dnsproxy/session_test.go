package dnsproxy

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
)

// newProxy returns a proxy that serves no shared listener, closed at
// cleanup.
func newProxy(t *testing.T, up []string, opts ...Option) *Proxy {
	t.Helper()
	p, err := New(up, append([]Option{WithTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("New(%v) error: %v", up, err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close() = %v, want nil", err)
		}
	})
	return p
}

// exchangeAt sends one query over proto to addr and returns the answer and
// the client's address.
func exchangeAt(t *testing.T, addr netip.AddrPort, proto string, m *mdns.Msg) (*mdns.Msg, netip.AddrPort) {
	t.Helper()
	c := &mdns.Client{Net: proto, Timeout: 30 * time.Second}
	conn, err := c.Dial(addr.String())
	if err != nil {
		t.Fatalf("dialing %s %s: %v", proto, addr, err)
	}
	defer conn.Close()
	resp, _, err := c.ExchangeWithConn(m, conn)
	if err != nil {
		t.Fatalf("exchange %s %s %s: %v", proto, addr, m.Question[0].Name, err)
	}
	return resp, addrPort(conn.LocalAddr())
}

// TestSessions checks that a query on a session's listeners is that
// session's, over UDP and TCP, IPv4 and (when the host has it) IPv6,
// whatever WithSession says, and that RemoveSession closes them.
func TestSessions(t *testing.T) {
	up := startUpstream(t)
	rec := newRecorder()
	p := newProxy(t, []string{up.Addr}, WithEmit(rec.emit),
		WithSession(func(netip.AddrPort) (string, bool) { return "not-this", true }))

	addrs := map[string][]netip.AddrPort{}
	for _, id := range []string{"s-1", "s-2"} {
		v4, v6, err := p.AddSession(id)
		if err != nil {
			t.Fatalf("AddSession(%s) error: %v", id, err)
		}
		if !v4.Addr().Is4() || !v4.Addr().IsLoopback() || v4.Port() == 0 {
			t.Fatalf("AddSession(%s) v4 = %v, want 127.0.0.1 with a port", id, v4)
		}
		addrs[id] = append(addrs[id], v4)
		if v6.IsValid() {
			if v6.Addr() != netip.IPv6Loopback() || v6.Port() == 0 {
				t.Fatalf("AddSession(%s) v6 = %v, want [::1] with a port", id, v6)
			}
			addrs[id] = append(addrs[id], v6)
		} else {
			t.Logf("no IPv6 loopback: session %s has an IPv4 listener only", id)
		}
	}
	if got := p.Stats().Sessions; got != 2 {
		t.Errorf("Stats().Sessions = %d, want 2", got)
	}
	if _, _, err := p.AddSession("s-1"); !errors.Is(err, ErrSessionExists) {
		t.Errorf("AddSession(s-1) again = %v, want %v", err, ErrSessionExists)
	}
	if _, _, err := p.AddSession(""); err == nil {
		t.Error("AddSession(\"\") = nil error, want one")
	}

	for _, id := range []string{"s-2", "s-1"} { // not the order they were added
		for _, addr := range addrs[id] {
			for _, proto := range []string{"udp", "tcp"} {
				resp, src := exchangeAt(t, addr, proto, query("a.example.", mdns.TypeA))
				if len(resp.Answer) != 1 {
					t.Errorf("%s %s %s: answers = %q, want one", id, addr, proto, rrStrings(resp.Answer))
				}
				e := rec.next(t)
				if e.SessionID != id {
					t.Errorf("%s %s %s: event session_id = %q, want %q", id, addr, proto, e.SessionID, id)
				}
				if e.Net.Proto != proto || e.Net.DstIP != addr.Addr().String() || e.Net.DstPort != addr.Port() ||
					e.Net.SrcIP != src.Addr().String() || e.Net.SrcPort != src.Port() {
					t.Errorf("%s %s %s: event net = %+v, want src %v dst %v", id, addr, proto, e.Net, src, addr)
				}
			}
		}
	}

	if err := p.RemoveSession("s-1"); err != nil {
		t.Fatalf("RemoveSession(s-1) = %v", err)
	}
	if err := p.RemoveSession("s-1"); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("RemoveSession(s-1) again = %v, want %v", err, ErrUnknownSession)
	}
	if got := p.Stats().Sessions; got != 1 {
		t.Errorf("Stats().Sessions after RemoveSession = %d, want 1", got)
	}
	// The removed session's sockets are closed: TCP is refused, and both
	// ports can be bound again.
	for _, addr := range addrs["s-1"] {
		if c, err := net.DialTimeout("tcp", addr.String(), 10*time.Second); err == nil {
			c.Close()
			t.Errorf("dialing the removed session's tcp %s succeeded", addr)
		}
		pc, err := net.ListenPacket("udp", addr.String())
		if err != nil {
			t.Errorf("binding the removed session's udp %s: %v", addr, err)
		} else {
			pc.Close()
		}
	}
	// The other session still answers.
	if resp, _ := exchangeAt(t, addrs["s-2"][0], "udp", query("v6.example.", mdns.TypeAAAA)); len(resp.Answer) != 1 {
		t.Errorf("s-2 after removing s-1: answers = %q, want one", rrStrings(resp.Answer))
	}
	if e := rec.next(t); e.SessionID != "s-2" {
		t.Errorf("event session_id = %q, want s-2", e.SessionID)
	}
	// A session id can be used again once removed.
	if _, _, err := p.AddSession("s-1"); err != nil {
		t.Errorf("AddSession(s-1) after RemoveSession = %v", err)
	}
}

func TestMaxSessions(t *testing.T) {
	up := startUpstream(t)
	p, err := New([]string{up.Addr}, WithMaxSessions(2))
	if err != nil {
		t.Fatal(err)
	}
	var v4s []netip.AddrPort
	for _, id := range []string{"a", "b"} {
		v4, _, err := p.AddSession(id)
		if err != nil {
			t.Fatalf("AddSession(%s) = %v", id, err)
		}
		v4s = append(v4s, v4)
	}
	if _, _, err := p.AddSession("c"); !errors.Is(err, ErrTooManySessions) {
		t.Errorf("AddSession beyond the bound = %v, want %v", err, ErrTooManySessions)
	}
	if err := p.RemoveSession("a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.AddSession("c"); err != nil {
		t.Errorf("AddSession after a removal = %v, want nil", err)
	}
	// Close closes every session's listeners.
	if err := p.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if got := p.Stats().Sessions; got != 0 {
		t.Errorf("Stats().Sessions after Close = %d, want 0", got)
	}
	if c, err := net.DialTimeout("tcp", v4s[1].String(), 10*time.Second); err == nil {
		c.Close()
		t.Errorf("dialing session b's tcp %s after Close succeeded", v4s[1])
	}
	if _, _, err := p.AddSession("d"); !errors.Is(err, ErrClosed) {
		t.Errorf("AddSession after Close = %v, want %v", err, ErrClosed)
	}
}

// hookCall is one call of the answer hook.
type hookCall struct {
	domain string
	ip     netip.Addr
	ttl    time.Duration
}

type hookRecorder struct {
	mu    sync.Mutex
	calls []hookCall
}

func (h *hookRecorder) hook(domain string, ip netip.Addr, ttl time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, hookCall{domain, ip, ttl})
}

// take returns the calls so far and forgets them.
func (h *hookRecorder) take() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.calls
	h.calls = nil
	return c
}

func TestAnswerHook(t *testing.T) {
	up := startUpstream(t)
	rec := newRecorder()
	hooks := &hookRecorder{}
	p := newProxy(t, []string{up.Addr}, WithEmit(rec.emit), WithAnswerHook(hooks.hook),
		WithPolicy(func(name string) (bool, string) { return name == "evil.example", "no" }))
	v4, _, err := p.AddSession("s")
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr
	tests := []struct {
		name  string
		qname string
		qtype uint16
		want  []hookCall
	}{
		{name: "A", qname: "a.example.", qtype: mdns.TypeA, want: []hookCall{{"a.example", a("192.0.2.1"), 300 * time.Second}}},
		{name: "AAAA", qname: "v6.example.", qtype: mdns.TypeAAAA, want: []hookCall{{"v6.example", a("2001:db8::1"), 120 * time.Second}}},
		{name: "CNAME chain names the query", qname: "WWW.example.", qtype: mdns.TypeA, want: []hookCall{{"www.example", a("192.0.2.7"), 20 * time.Second}}},
		{name: "two addresses", qname: "two.example.", qtype: mdns.TypeA,
			want: []hookCall{{"two.example", a("192.0.2.8"), 50 * time.Second}, {"two.example", a("192.0.2.9"), 50 * time.Second}}},
		{name: "NXDOMAIN", qname: "missing.example.", qtype: mdns.TypeA},
		{name: "blocked", qname: "evil.example.", qtype: mdns.TypeA},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exchangeAt(t, v4, "udp", query(tt.qname, tt.qtype))
			// The hook ran before the answer was written: its calls are
			// there as soon as the client has the answer.
			if got := hooks.take(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("hook calls = %v, want %v", got, tt.want)
			}
			rec.next(t)
		})
	}
}

func TestNoUpstream(t *testing.T) {
	rec := newRecorder()
	p := newProxy(t, nil, WithAllowNoUpstream(), WithResolvConf(filepath.Join(t.TempDir(), "missing")), WithEmit(rec.emit),
		WithPolicy(func(name string) (bool, string) { return name == "evil.example", "no" }))
	if got := p.Upstream(); len(got) != 0 {
		t.Errorf("Upstream() = %q, want none", got)
	}
	v4, _, err := p.AddSession("s")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		qname string
		rcode int
	}{{"a.example.", mdns.RcodeServerFailure}, {"evil.example.", mdns.RcodeNameError}} {
		resp, _ := exchangeAt(t, v4, "tcp", query(tt.qname, mdns.TypeA))
		if resp.Rcode != tt.rcode {
			t.Errorf("%s: rcode = %s, want %s", tt.qname, rcodeString(resp.Rcode), rcodeString(tt.rcode))
		}
		if e := rec.next(t); e.Net.DNS.RCode != rcodeString(tt.rcode) || e.SessionID != "s" {
			t.Errorf("%s: event rcode %s session %q, want %s, s", tt.qname, e.Net.DNS.RCode, e.SessionID, rcodeString(tt.rcode))
		}
	}
	if st := p.Stats(); st.UpstreamFailures != 1 || st.Blocked != 1 {
		t.Errorf("Stats() = %+v, want UpstreamFailures 1, Blocked 1", st)
	}
}

func TestResolvConf(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		path string
		want []string
		err  error // nil with wantErr: any error
		fail bool
	}{
		{name: "nameservers", path: writeFile(t, dir, "ok.conf", "nameserver 192.0.2.53\nnameserver 2001:db8::53\n"),
			want: []string{"192.0.2.53:53", "[2001:db8::53]:53"}},
		{name: "none", path: writeFile(t, dir, "none.conf", "search example\n"), err: ErrNoUpstream, fail: true},
		{name: "missing", path: filepath.Join(dir, "missing"), err: os.ErrNotExist, fail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolvConf(tt.path)
			if tt.fail {
				if err == nil || (tt.err != nil && !errors.Is(err, tt.err)) {
					t.Errorf("ResolvConf(%s) error = %v, want %v", tt.path, err, tt.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ResolvConf(%s) = %q, %v, want %q", tt.path, got, err, tt.want)
			}
		})
	}
}
