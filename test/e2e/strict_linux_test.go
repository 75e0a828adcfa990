package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandtrail/sandtrail/dnsproxy/dnstest"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/test/testnet"
)

// strictZone is what TestRunStrictPolicy's upstream answers: an allowed
// registry, a registry the session never looks up, and a name the policy
// does not allow.
var strictZone = dnstest.Zone{
	"registry.npmjs.org.": {"registry.npmjs.org. 300 IN A 192.0.2.10"},
	"pypi.org.":           {"pypi.org. 300 IN A 192.0.2.11"},
	"evil.example.":       {"evil.example. 300 IN A 192.0.2.20"},
}

// strictResolver is the address of a resolver off port 53, where the
// test runs a real DNS server that the session must not reach.
const strictResolver = "192.0.2.53:5353"

// addLocal puts the documentation addresses addrs on lo in e's namespace,
// so that the test's listeners can sit on them.
func (e *env) addLocal(addrs ...string) {
	e.t.Helper()
	for _, a := range addrs {
		if out, err := e.ns.Output(exec.Command("ip", "addr", "add", a+"/32", "dev", "lo")); err != nil {
			e.t.Fatalf("ip addr add %s dev lo: %v\n%s", a, err, out)
		}
	}
}

// TestRunStrictPolicy runs the unprivileged agent in a real `sandtrail
// run` session under the shipped policies/strict.yaml: the session's
// lookup of an approved registry is refused (the host serves the mirror,
// which is then the only road to a registry), and so is a connection to
// the address its upstream has for it, before and after the lookup; an
// approved registry's address the session never looked up is refused,
// and so is an address looked up under a name strict.yaml does not
// allow; a resolver on port 5353 is a blocked connection and a blocked
// send that its server never sees; the mirror's loopback port is
// reachable and another loopback port is not. Every listener sits in the
// test's namespace, and counts what reaches it.
func TestRunStrictPolicy(t *testing.T) {
	t.Parallel()
	e := newNetEnv(t)
	e.addLocal("192.0.2.10", "192.0.2.11", "192.0.2.20", "192.0.2.53")
	up, resolver := e.startStrictServers()
	type dest struct {
		addr    string
		port    uint16
		verdict string // the recorded verdict of the connects after the lookups
		domain  string // the recorded domain of those connects
	}
	dests := []dest{
		{addr: "192.0.2.10", port: 443, verdict: "blocked"},
		{addr: "192.0.2.11", port: 443, verdict: "blocked"},
		{addr: "192.0.2.20", port: 443, verdict: "blocked", domain: "evil.example"},
		{addr: "127.0.0.1", port: 8484, verdict: "allowed"},
		{addr: "127.0.0.1", verdict: "blocked"},
	}
	counts := make([]*atomic.Int64, len(dests))
	e.do(func() {
		for i := range dests {
			dests[i].port, counts[i] = strictListen(t, dests[i].addr, dests[i].port)
		}
	})
	dial := func(prefix string, args ...string) string {
		return strings.Join(helperCmd("egressdial", args...), " ") + " | sed 's/^/" + prefix + ": /'"
	}
	var after []string
	for _, d := range dests {
		after = append(after, "tcp", d.addr, strconv.Itoa(int(d.port)))
	}
	host, port, _ := net.SplitHostPort(strictResolver)
	script := strings.Join([]string{
		dial("before", "tcp", "192.0.2.10", "443"),
		`getent hosts registry.npmjs.org; echo "registry=$?"`,
		`getent hosts evil.example; echo "evil=$?"`,
		dial("after", after...),
		dial("resolver", "udp", host, port, "tcp", host, port),
		strings.Join(helperCmd("dnsquery", strictResolver, "registry.npmjs.org"), " ") + `; echo "dnsquery=$?"`,
	}, "\n")
	r := e.run("--policy", "../../policies/strict.yaml", "--dns-upstream", up.Addr, "--user", "nobody", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	want := []string{"before: tcp 192.0.2.10 443 EPERM", "registry=2", "evil=0",
		"resolver: udp 192.0.2.53 5353 EPERM", "resolver: tcp 192.0.2.53 5353 EPERM", "dnsquery=1"}
	for _, d := range dests {
		if d.verdict == "blocked" {
			want = append(want, fmt.Sprintf("after: tcp %s %d EPERM", d.addr, d.port))
			continue
		}
		line := fmt.Sprintf("after: tcp %s %d ", d.addr, d.port)
		if !strings.Contains(r.stdout, line+"OK\n") && !strings.Contains(r.stdout, line+"EINPROGRESS\n") {
			t.Errorf("session output lacks %q followed by OK or EINPROGRESS:\n%s", line, r.stdout)
		}
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w+"\n") {
			t.Errorf("session output lacks %q:\n%s", w, r.stdout)
		}
	}
	for i, d := range dests {
		if n, allowed := counts[i].Load(), d.verdict == "allowed"; allowed != (n > 0) {
			t.Errorf("the listener on %s:%d got %d connections, want them only if allowed (%s)", d.addr, d.port, n, d.verdict)
		}
	}
	if n := resolver.Count("registry.npmjs.org."); n != 0 {
		t.Errorf("the resolver on %s got %d queries, want 0", strictResolver, n)
	}
	if n := up.Count("registry.npmjs.org."); n != 0 {
		t.Errorf("the DNS proxy asked its upstream for registry.npmjs.org %d times, want 0: it is refused to sessions", n)
	}
	evs := e.events(r.summary.SessionID)
	for _, d := range dests {
		want := []string{d.verdict}
		if d.addr == "192.0.2.10" {
			want = []string{"blocked", "blocked"} // before the lookup, then after it
		}
		checkStrictConnects(t, evs, d.addr, d.port, d.domain, want)
	}
	checkStrictResolver(t, evs)
	checkRegistryRefused(t, evs, "registry.npmjs.org")
	e.verify()
}

// startStrictServers starts, in e's namespace, the upstream that the
// session's DNS proxy asks (on loopback) and the resolver on
// strictResolver that the session must not reach.
func (e *env) startStrictServers() (up, resolver *dnstest.Server) {
	e.t.Helper()
	e.do(func() {
		up = dnstest.Start(e.t, "127.0.0.1", strictZone)
		pc, err := net.ListenPacket("udp", strictResolver)
		if err != nil {
			e.t.Fatal(err)
		}
		ln, err := net.Listen("tcp", strictResolver)
		if err != nil {
			pc.Close()
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { pc.Close(); ln.Close() })
		resolver = dnstest.New(strictResolver, strictZone)
		resolver.Serve(e.t, pc, ln)
	})
	return up, resolver
}

// strictListen listens for TCP on addr:port (a free port when port is 0)
// and counts the connections it accepts.
func strictListen(t *testing.T, addr string, port uint16) (uint16, *atomic.Int64) {
	t.Helper()
	ln, n := testnet.StartCountingServer(t, "tcp", netip.AddrPortFrom(netip.MustParseAddr(addr), port).String())
	return uint16(ln.Addr().(*net.TCPAddr).Port), n
}

// checkStrictConnects checks the verdicts of the session's net.connect
// events to addr:port, in order, and that the allowed ones and those
// after a lookup name domain, and the blocked ones give the default's
// reason.
func checkStrictConnects(t *testing.T, evs []*event.Event, addr string, port uint16, domain string, want []string) {
	t.Helper()
	var got []string
	for _, ev := range kinds(evs, event.KindNetConnect) {
		if ev.Net.DstIP != addr || ev.Net.DstPort != port {
			continue
		}
		got = append(got, ev.Net.Verdict)
		if ev.Net.Verdict == "blocked" && !strings.Contains(ev.Net.Reason, "default block") {
			t.Errorf("blocked net.connect to %s:%d: reason %q, want the default's", addr, port, ev.Net.Reason)
		}
		last := len(got) == len(want)
		if last && ev.Net.Domain != domain {
			t.Errorf("net.connect to %s:%d (%s): domain %q, want %q", addr, port, ev.Net.Verdict, ev.Net.Domain, domain)
		}
		if !last && ev.Net.Domain != "" {
			t.Errorf("net.connect to %s:%d before the lookup: domain %q, want none", addr, port, ev.Net.Domain)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("net.connect verdicts to %s:%d = %q, want %q", addr, port, got, want)
	}
}

// checkStrictResolver checks that every connect and send to the resolver
// off port 53 was recorded blocked, at least one of each.
func checkStrictResolver(t *testing.T, evs []*event.Event) {
	t.Helper()
	ap := netip.MustParseAddrPort(strictResolver)
	for _, kind := range []string{event.KindNetConnect, event.KindNetSend} {
		n := 0
		for _, ev := range kinds(evs, kind) {
			if ev.Net.DstIP != ap.Addr().String() || ev.Net.DstPort != ap.Port() {
				continue
			}
			n++
			if ev.Net.Verdict != "blocked" {
				t.Errorf("%s to %s: verdict %s (%s), want blocked", kind, strictResolver, ev.Net.Verdict, ev.Net.Reason)
			}
		}
		if n == 0 {
			t.Errorf("no %s to %s recorded", kind, strictResolver)
		}
	}
}

// checkRegistryRefused checks that the session's lookups of the approved
// registry host were refused, each recorded with a reason naming the
// mirror, and at least one.
func checkRegistryRefused(t *testing.T, evs []*event.Event, host string) {
	t.Helper()
	n := 0
	for _, ev := range kinds(evs, event.KindNetDNS) {
		if ev.Net.DNS == nil || strings.TrimSuffix(ev.Net.DNS.Query, ".") != host {
			continue
		}
		n++
		if ev.Net.Verdict != "blocked" || !strings.Contains(ev.Net.Reason, "only through the mirror") {
			t.Errorf("net.dns of %s: verdict %q, reason %q; want blocked, naming the mirror", host, ev.Net.Verdict, ev.Net.Reason)
		}
	}
	if n == 0 {
		t.Errorf("no net.dns of %s in the record", host)
	}
}
