package dnsproxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/sandtrail/sandtrail/dnsproxy/dnstest"
	"github.com/sandtrail/sandtrail/record/event"
)

// zone holds the upstream's fixed records; names not in it are NXDOMAIN.
var zone = dnstest.Zone{
	"a.example.":    {"a.example. 300 IN A 192.0.2.1"},
	"v6.example.":   {"v6.example. 120 IN AAAA 2001:db8::1"},
	"www.example.":  {"www.example. 60 IN CNAME web.example.", "web.example. 30 IN CNAME cdn.example.", "cdn.example. 20 IN A 192.0.2.7"},
	"two.example.":  {"two.example. 50 IN A 192.0.2.8", "two.example. 50 IN A 192.0.2.9"},
	"zero.example.": {"zero.example. 0 IN A 192.0.2.20"},
}

// startUpstream starts a real DNS server on 127.0.0.1 that answers from
// zone, for the proxy's upstream.
func startUpstream(t testing.TB) *dnstest.Server {
	t.Helper()
	return dnstest.Start(t, "127.0.0.1", zone)
}

// silentUpstream binds UDP and TCP sockets that never answer: the TCP
// handshake completes in the kernel's backlog and nothing is ever read.
func silentUpstream(t testing.TB) string {
	t.Helper()
	pc, _ := dnstest.BindPair(t, "127.0.0.1")
	return pc.LocalAddr().String()
}

// clock is an injectable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// recorder is a non-blocking emit that keeps events in a channel.
type recorder struct{ c chan *event.Event }

func newRecorder() *recorder { return &recorder{c: make(chan *event.Event, 256)} }

func (r *recorder) emit(e *event.Event) {
	select {
	case r.c <- e:
	default:
	}
}

// next waits for the next event. The bound only catches a hang.
func (r *recorder) next(t *testing.T) *event.Event {
	t.Helper()
	select {
	case e := <-r.c:
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("no event emitted")
		return nil
	}
}

// startProxy starts a proxy on 127.0.0.1:0 and stops it at cleanup.
func startProxy(t testing.TB, up []string, opts ...Option) *Proxy {
	t.Helper()
	// A generous upstream timeout, so that a loaded machine never turns an
	// answer into SERVFAIL; tests of timeouts pass their own.
	p, err := New(up, append([]Option{WithTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("New(%v) error: %v", up, err)
	}
	if err := p.Listen("127.0.0.1:0"); err != nil {
		t.Fatalf("Listen error: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(context.Background()) }()
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close() = %v, want nil", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve() = %v, want nil", err)
		}
	})
	return p
}

// exchange sends one query over proto and returns the answer and the
// client's address.
func exchange(t *testing.T, p *Proxy, proto string, m *mdns.Msg) (*mdns.Msg, netip.AddrPort) {
	t.Helper()
	c := &mdns.Client{Net: proto, Timeout: 30 * time.Second}
	conn, err := c.Dial(p.Addr().String())
	if err != nil {
		t.Fatalf("dialing %s %s: %v", proto, p.Addr(), err)
	}
	defer conn.Close()
	resp, _, err := c.ExchangeWithConn(m, conn)
	if err != nil {
		t.Fatalf("exchange %s %s: %v", proto, m.Question[0].Name, err)
	}
	return resp, addrPort(conn.LocalAddr())
}

func query(name string, qtype uint16) *mdns.Msg {
	m := new(mdns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

func rrStrings(rrs []mdns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	return out
}

func TestProxy(t *testing.T) {
	up := startUpstream(t)
	rec := newRecorder()
	clk := &clock{t: t0}
	p := startProxy(t, []string{up.Addr},
		WithEmit(rec.emit), WithClock(clk.now), WithHost("h1"),
		WithPolicy(func(name string) (bool, string) {
			if name == "evil.example" || strings.HasSuffix(name, ".evil.example") {
				return true, "egress policy: domain evil.example"
			}
			return false, ""
		}),
		WithSession(func(src netip.AddrPort) (string, bool) {
			if src.Addr() == netip.MustParseAddr("127.0.0.1") {
				return "s-1", true
			}
			return "", false
		}))

	tests := []struct {
		name      string
		qname     string
		qtype     uint16
		rcode     int
		answers   []string // the records the client must get, verbatim
		verdict   string
		reason    string
		event     []event.DNSAnswer
		upstreams int // queries upstream must have seen for qname per proto
	}{
		{
			name: "A", qname: "a.example.", qtype: mdns.TypeA, rcode: mdns.RcodeSuccess,
			answers: zone["a.example."], verdict: "allowed",
			event: []event.DNSAnswer{{Type: "A", Data: "192.0.2.1", TTL: 300}}, upstreams: 1,
		},
		{
			name: "AAAA", qname: "v6.example.", qtype: mdns.TypeAAAA, rcode: mdns.RcodeSuccess,
			answers: zone["v6.example."], verdict: "allowed",
			event: []event.DNSAnswer{{Type: "AAAA", Data: "2001:db8::1", TTL: 120}}, upstreams: 1,
		},
		{
			name: "CNAME chain", qname: "www.example.", qtype: mdns.TypeA, rcode: mdns.RcodeSuccess,
			answers: zone["www.example."], verdict: "allowed",
			event: []event.DNSAnswer{
				{Type: "CNAME", Data: "web.example", TTL: 60},
				{Type: "CNAME", Data: "cdn.example", TTL: 30},
				{Type: "A", Data: "192.0.2.7", TTL: 20},
			}, upstreams: 1,
		},
		{
			name: "NXDOMAIN from upstream", qname: "missing.example.", qtype: mdns.TypeA, rcode: mdns.RcodeNameError,
			verdict: "allowed", upstreams: 1,
		},
		{
			name: "blocked", qname: "evil.example.", qtype: mdns.TypeA, rcode: mdns.RcodeNameError,
			verdict: "blocked", reason: "egress policy: domain evil.example",
		},
		{
			name: "blocked subdomain in mixed case", qname: "Api.EVIL.example.", qtype: mdns.TypeAAAA, rcode: mdns.RcodeNameError,
			verdict: "blocked", reason: "egress policy: domain evil.example",
		},
	}
	for i, proto := range []string{"udp", "tcp"} {
		for _, tt := range tests {
			t.Run(proto+"/"+tt.name, func(t *testing.T) {
				resp, src := exchange(t, p, proto, query(tt.qname, tt.qtype))
				if resp.Rcode != tt.rcode {
					t.Errorf("rcode = %s, want %s", rcodeString(resp.Rcode), rcodeString(tt.rcode))
				}
				if got := rrStrings(resp.Answer); !reflect.DeepEqual(got, normalize(t, tt.answers)) {
					t.Errorf("answers = %q, want %q", got, normalize(t, tt.answers))
				}
				if got, want := up.Count(strings.ToLower(tt.qname)), tt.upstreams*(i+1); got != want {
					t.Errorf("upstream saw %d queries for %s, want %d", got, tt.qname, want)
				}
				got := rec.next(t)
				want := &event.Event{
					V: event.SchemaVersion, TS: t0, SessionID: "s-1", Host: "h1", Kind: event.KindNetDNS,
					Source: event.SourceKernel,
					Net: &event.Net{
						Op: "dns", Proto: proto,
						SrcIP: "127.0.0.1", SrcPort: src.Port(),
						DstIP: "127.0.0.1", DstPort: p.Addr().Port(),
						Verdict: tt.verdict,
						Reason:  tt.reason,
						DNS: &event.DNS{
							Query:   strings.TrimSuffix(strings.ToLower(tt.qname), "."),
							QType:   mdns.TypeToString[tt.qtype],
							RCode:   mdns.RcodeToString[tt.rcode],
							Answers: tt.event,
						},
					},
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("event = %s, want %s", mustJSON(t, got), mustJSON(t, want))
				}
				b, err := event.Marshal(got)
				if err != nil {
					t.Fatalf("Marshal(event) error: %v", err)
				}
				if _, err := event.Unmarshal(b); err != nil {
					t.Errorf("Unmarshal(Marshal(event)) error: %v", err)
				}
			})
		}
	}
	if got := up.Count("evil.example.") + up.Count("api.evil.example."); got != 0 {
		t.Errorf("upstream saw %d queries for blocked names, want 0", got)
	}
	st := p.Stats()
	if want := (Stats{Queries: 12, Blocked: 4}); st != want {
		t.Errorf("Stats() = %+v, want %+v", st, want)
	}
	select {
	case e := <-rec.c:
		t.Errorf("extra event %s", mustJSON(t, e))
	default:
	}
}

func normalize(t *testing.T, recs []string) []string {
	t.Helper()
	var out []string
	for _, s := range recs {
		rr, err := mdns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rr.String())
	}
	return out
}

func mustJSON(t *testing.T, e *event.Event) string {
	t.Helper()
	b, err := event.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBlockedExtendedError(t *testing.T) {
	up := startUpstream(t)
	p := startProxy(t, []string{up.Addr}, WithPolicy(func(string) (bool, string) { return true, "no lookups" }))
	m := query("a.example.", mdns.TypeA)
	m.SetEdns0(1232, false)
	resp, _ := exchange(t, p, "udp", m)
	if resp.Rcode != mdns.RcodeNameError {
		t.Fatalf("rcode = %s, want NXDOMAIN", rcodeString(resp.Rcode))
	}
	opt := resp.IsEdns0()
	if opt == nil {
		t.Fatal("answer to an EDNS(0) query has no OPT record")
	}
	var ede *mdns.EDNS0_EDE
	for _, o := range opt.Option {
		if e, ok := o.(*mdns.EDNS0_EDE); ok {
			ede = e
		}
	}
	if ede == nil || ede.InfoCode != mdns.ExtendedErrorCodeBlocked || ede.ExtraText != "no lookups" {
		t.Errorf("EDE = %v, want Blocked with text %q", ede, "no lookups")
	}
	if n := up.Count("a.example."); n != 0 {
		t.Errorf("upstream saw %d queries, want 0", n)
	}
}

func TestUpstreamFailure(t *testing.T) {
	up := startUpstream(t)
	silent := silentUpstream(t)
	tests := []struct {
		name     string
		upstream []string
		timeout  time.Duration
		rcode    int
		failures uint64
	}{
		{name: "timeout gives SERVFAIL", upstream: []string{silent}, timeout: 200 * time.Millisecond,
			rcode: mdns.RcodeServerFailure, failures: 2},
		// The real upstream must answer within the timeout even on a loaded
		// machine, so the wait at the silent one is longer here.
		{name: "next upstream after a timeout", upstream: []string{silent, up.Addr}, timeout: 3 * time.Second,
			rcode: mdns.RcodeSuccess},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			p := startProxy(t, tt.upstream, WithTimeout(tt.timeout), WithEmit(rec.emit))
			for _, proto := range []string{"udp", "tcp"} {
				resp, _ := exchange(t, p, proto, query("a.example.", mdns.TypeA))
				if resp.Rcode != tt.rcode {
					t.Errorf("%s: rcode = %s, want %s", proto, rcodeString(resp.Rcode), rcodeString(tt.rcode))
				}
				e := rec.next(t)
				if got, want := e.Net.DNS.RCode, rcodeString(tt.rcode); got != want {
					t.Errorf("%s: event rcode = %s, want %s", proto, got, want)
				}
				if e.Net.Verdict != "allowed" {
					t.Errorf("%s: event verdict = %s, want allowed", proto, e.Net.Verdict)
				}
			}
			if got := p.Stats().UpstreamFailures; got != tt.failures {
				t.Errorf("Stats().UpstreamFailures = %d, want %d", got, tt.failures)
			}
		})
	}
}

func TestDomainOf(t *testing.T) {
	up := startUpstream(t)
	clk := &clock{t: t0}
	rec := newRecorder()
	p := startProxy(t, []string{up.Addr}, WithClock(clk.now), WithEmit(rec.emit))
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"a.example.", mdns.TypeA}, {"WWW.example.", mdns.TypeA}, {"v6.example.", mdns.TypeAAAA}, {"two.example.", mdns.TypeA},
		{"zero.example.", mdns.TypeA}} {
		exchange(t, p, "udp", query(q.name, q.qtype))
		rec.next(t) // the map is filled before the event is emitted
	}
	tests := []struct {
		name  string
		after time.Duration // since t0
		ip    string
		want  string
		ok    bool
	}{
		{name: "A", after: 0, ip: "192.0.2.1", want: "a.example", ok: true},
		{name: "CNAME chain names the query", after: 0, ip: "192.0.2.7", want: "www.example", ok: true},
		{name: "AAAA", after: 0, ip: "2001:db8::1", want: "v6.example", ok: true},
		{name: "second A", after: 0, ip: "192.0.2.9", want: "two.example", ok: true},
		{name: "v4-mapped", after: 0, ip: "::ffff:192.0.2.1", want: "a.example", ok: true},
		{name: "unknown", after: 0, ip: "192.0.2.99"},
		{name: "TTL 0 kept for MinDomainTTL", after: MinDomainTTL - time.Second, ip: "192.0.2.20", want: "zero.example", ok: true},
		{name: "TTL 0 after MinDomainTTL", after: MinDomainTTL, ip: "192.0.2.20"},
		{name: "before TTL", after: 19 * time.Second, ip: "192.0.2.7", want: "www.example", ok: true},
		{name: "at TTL", after: 20 * time.Second, ip: "192.0.2.7"},
		{name: "AAAA before TTL", after: 119 * time.Second, ip: "2001:db8::1", want: "v6.example", ok: true},
		{name: "AAAA after TTL", after: 121 * time.Second, ip: "2001:db8::1"},
		{name: "A before TTL", after: 299 * time.Second, ip: "192.0.2.1", want: "a.example", ok: true},
		{name: "A after TTL", after: 301 * time.Second, ip: "192.0.2.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.mu.Lock()
			clk.t = t0.Add(tt.after)
			clk.mu.Unlock()
			got, ok := p.DomainOf(netip.MustParseAddr(tt.ip))
			if got != tt.want || ok != tt.ok {
				t.Errorf("DomainOf(%s) at +%v = %q, %v, want %q, %v", tt.ip, tt.after, got, ok, tt.want, tt.ok)
			}
		})
	}
	// A fresh answer renews an expired address.
	exchange(t, p, "tcp", query("a.example.", mdns.TypeA))
	rec.next(t)
	clk.advance(299 * time.Second)
	if got, ok := p.DomainOf(netip.MustParseAddr("192.0.2.1")); got != "a.example" || !ok {
		t.Errorf("DomainOf(192.0.2.1) after a new answer = %q, %v, want a.example, true", got, ok)
	}
}

func TestDomainMapBounded(t *testing.T) {
	m := newDomainMap(3)
	exp := t0.Add(time.Hour)
	for i := 1; i <= 5; i++ {
		m.put(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), "n"+strconv.Itoa(i), exp)
	}
	// Renewing 3 makes 4 the least recently answered.
	m.put(netip.AddrFrom4([4]byte{192, 0, 2, 3}), "n3b", exp)
	m.put(netip.AddrFrom4([4]byte{192, 0, 2, 6}), "n6", exp)
	if got := m.len(); got != 3 {
		t.Errorf("len() = %d, want 3", got)
	}
	tests := []struct {
		name string
		ip   byte
		want string
		ok   bool
	}{
		{name: "oldest evicted", ip: 1},
		{name: "older evicted", ip: 2},
		{name: "least recently answered evicted", ip: 4},
		{name: "renewed kept", ip: 3, want: "n3b", ok: true},
		{name: "kept", ip: 5, want: "n5", ok: true},
		{name: "newest kept", ip: 6, want: "n6", ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip := netip.AddrFrom4([4]byte{192, 0, 2, tt.ip})
			if got, ok := m.get(ip, t0); got != tt.want || ok != tt.ok {
				t.Errorf("get(%s) = %q, %v, want %q, %v", ip, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestEmitDoesNotDelayAnswers checks that the answer is written before the
// event is emitted: even an emit that blocks (a caller's bug) does not hold
// up the client.
func TestEmitDoesNotDelayAnswers(t *testing.T) {
	up := startUpstream(t)
	release := make(chan struct{})
	emitted := make(chan *event.Event, 4)
	p := startProxy(t, []string{up.Addr}, WithEmit(func(e *event.Event) {
		<-release
		emitted <- e
	}))
	for _, proto := range []string{"udp", "tcp"} {
		resp, _ := exchange(t, p, proto, query("a.example.", mdns.TypeA))
		if len(resp.Answer) != 1 {
			t.Errorf("%s: answers = %q, want one", proto, rrStrings(resp.Answer))
		}
	}
	select {
	case e := <-emitted:
		t.Fatalf("event %v emitted before release", e.Net.DNS)
	default:
	}
	close(release)
	for range 2 {
		select {
		case <-emitted:
		case <-time.After(30 * time.Second):
			t.Fatal("event not emitted after release")
		}
	}
}

func TestMalformed(t *testing.T) {
	up := startUpstream(t)
	rec := newRecorder()
	p := startProxy(t, []string{up.Addr}, WithEmit(rec.emit))

	valid, err := query("a.example.", mdns.TypeA).Pack()
	if err != nil {
		t.Fatal(err)
	}
	twoQuestions := query("a.example.", mdns.TypeA)
	twoQuestions.Question = append(twoQuestions.Question, twoQuestions.Question[0])
	twoQ, err := twoQuestions.Pack()
	if err != nil {
		t.Fatal(err)
	}
	response := query("a.example.", mdns.TypeA)
	response.Response = true
	resp, err := response.Pack()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		pkt   []byte
		rcode int // -1: no answer expected
	}{
		{name: "short header dropped", pkt: []byte{0x12, 0x34, 0x01}, rcode: -1},
		{name: "truncated question", pkt: valid[:len(valid)-3], rcode: mdns.RcodeFormatError},
		{name: "two questions", pkt: twoQ, rcode: mdns.RcodeFormatError},
		{name: "a response is ignored", pkt: resp, rcode: -1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("udp", p.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write(tt.pkt); err != nil {
				t.Fatal(err)
			}
			if tt.rcode >= 0 {
				conn.SetReadDeadline(time.Now().Add(30 * time.Second))
				buf := make([]byte, 512)
				n, err := conn.Read(buf)
				if err != nil {
					t.Fatalf("reading answer: %v", err)
				}
				m := new(mdns.Msg)
				if err := m.Unpack(buf[:n]); err != nil {
					t.Fatalf("unpacking answer: %v", err)
				}
				if m.Rcode != tt.rcode {
					t.Errorf("rcode = %s, want %s", rcodeString(m.Rcode), rcodeString(tt.rcode))
				}
			}
			// The counter rises once the proxy read the packet; a hang
			// fails after the bound.
			deadline := time.Now().Add(30 * time.Second)
			for p.Stats().Malformed < uint64(i+1) {
				if time.Now().After(deadline) {
					t.Fatalf("Stats().Malformed = %d, want %d", p.Stats().Malformed, i+1)
				}
				time.Sleep(5 * time.Millisecond)
			}
			// The proxy still answers.
			if r, _ := exchange(t, p, "udp", query("a.example.", mdns.TypeA)); len(r.Answer) != 1 {
				t.Errorf("answers after malformed packet = %q, want one", rrStrings(r.Answer))
			}
			if e := rec.next(t); e.Net.DNS.Query != "a.example" {
				t.Errorf("event query = %q, want a.example (malformed packets make no event)", e.Net.DNS.Query)
			}
		})
	}
	if got := p.Stats().Queries; got != uint64(len(tests)) {
		t.Errorf("Stats().Queries = %d, want %d", got, len(tests))
	}
}

// writeFile writes body to the file name in dir and returns its path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	conf := writeFile(t, dir, "resolv.conf", "search example\nnameserver 192.0.2.53\nnameserver 2001:db8::53\noptions ndots:1\n")
	empty := writeFile(t, dir, "empty.conf", "search example\n")
	tests := []struct {
		name     string
		upstream []string
		opts     []Option
		want     []string
		err      error // nil with wantErr: any error
		wantErr  bool
	}{
		{name: "ip", upstream: []string{"192.0.2.1"}, want: []string{"192.0.2.1:53"}},
		{name: "ip and port", upstream: []string{"192.0.2.1:5353"}, want: []string{"192.0.2.1:5353"}},
		{name: "ipv6", upstream: []string{"2001:db8::1", "[2001:db8::2]:5353", "[2001:db8::3]"},
			want: []string{"[2001:db8::1]:53", "[2001:db8::2]:5353", "[2001:db8::3]:53"}},
		{name: "resolv.conf", opts: []Option{WithResolvConf(conf)}, want: []string{"192.0.2.53:53", "[2001:db8::53]:53"}},
		{name: "resolv.conf without nameserver", opts: []Option{WithResolvConf(empty)}, err: ErrNoUpstream, wantErr: true},
		{name: "missing resolv.conf", opts: []Option{WithResolvConf(filepath.Join(dir, "nope"))}, err: os.ErrNotExist, wantErr: true},
		{name: "host name", upstream: []string{"dns.example:53"}, wantErr: true},
		{name: "port 0", upstream: []string{"192.0.2.1:0"}, wantErr: true},
		{name: "garbage", upstream: []string{"not an address"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.upstream, tt.opts...)
			if tt.wantErr {
				if err == nil || (tt.err != nil && !errors.Is(err, tt.err)) {
					t.Errorf("New(%q) error = %v, want %v", tt.upstream, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q) error = %v", tt.upstream, err)
			}
			if got := p.Upstream(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("New(%q).Upstream() = %q, want %q", tt.upstream, got, tt.want)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	up := startUpstream(t)
	p, err := New([]string{up.Addr})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(context.Background()); !errors.Is(err, ErrNotListening) {
		t.Errorf("Serve before Listen = %v, want %v", err, ErrNotListening)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.ListenAndServe(ctx, "127.0.0.1:0") }()
	// Wait for the address, then for an answer.
	deadline := time.Now().Add(30 * time.Second)
	for !p.Addr().IsValid() {
		if time.Now().After(deadline) {
			t.Fatal("proxy never listened")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r, _ := exchange(t, p, "tcp", query("a.example.", mdns.TypeA)); len(r.Answer) != 1 {
		t.Errorf("answers = %q, want one", rrStrings(r.Answer))
	}
	if err := p.Listen("127.0.0.1:0"); !errors.Is(err, ErrListening) {
		t.Errorf("second Listen = %v, want %v", err, ErrListening)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ListenAndServe after cancel = %v, want nil", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close after cancel = %v, want nil", err)
	}
	if err := p.Listen("127.0.0.1:0"); !errors.Is(err, ErrClosed) {
		t.Errorf("Listen after Close = %v, want %v", err, ErrClosed)
	}
	// The port is released.
	pc, err := net.ListenPacket("udp", p.Addr().String())
	if err != nil {
		t.Errorf("binding the closed proxy's udp port: %v", err)
	} else {
		pc.Close()
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestMaxInflight holds one query at a silent upstream; with a bound of one,
// the next query is answered SERVFAIL at once and still makes its event.
func TestMaxInflight(t *testing.T) {
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	rec := newRecorder()
	p := startProxy(t, []string{silent.LocalAddr().String()},
		WithMaxInflight(1), WithTimeout(time.Hour), WithEmit(rec.emit))

	go func() {
		// Its answer (SERVFAIL once the proxy closes) does not matter.
		c := &mdns.Client{Net: "udp", Timeout: time.Minute}
		_, _, _ = c.Exchange(query("a.example.", mdns.TypeA), p.Addr().String())
	}()
	// The first query is in flight once the upstream received it.
	buf := make([]byte, 512)
	silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, _, err := silent.ReadFrom(buf); err != nil {
		t.Fatalf("upstream never received the first query: %v", err)
	}
	resp, _ := exchange(t, p, "tcp", query("v6.example.", mdns.TypeAAAA))
	if resp.Rcode != mdns.RcodeServerFailure {
		t.Errorf("rcode beyond the bound = %s, want SERVFAIL", rcodeString(resp.Rcode))
	}
	e := rec.next(t)
	if e.Net.DNS.Query != "v6.example" || e.Net.DNS.RCode != "SERVFAIL" {
		t.Errorf("event = %+v, want v6.example SERVFAIL", e.Net.DNS)
	}
	if got := p.Stats(); got.Shed != 1 || got.UpstreamFailures != 0 {
		t.Errorf("Stats() = %+v, want Shed 1, UpstreamFailures 0", got)
	}
	// Closing the proxy ends the held query's upstream wait.
	if err := p.Close(); err != nil {
		t.Errorf("Close() = %v, want nil", err)
	}
}
