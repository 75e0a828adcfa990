package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/sandtrail/sandtrail/dnsproxy/dnstest"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/test/netns"
)

// waitFileHelper waits until the file PATH exists, for at most waitBound.
func waitFileHelper(args []string) int {
	if len(args) != 1 {
		return 2
	}
	for deadline := time.Now().Add(waitBound); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(args[0]); err == nil {
			return 0
		}
	}
	return 1
}

// dnsQueryHelper asks SERVER (ip:port) for the A records of NAME, over UDP
// and then TCP, straight to that address (no resolv.conf), and prints the
// answers. It fails unless both transports got an answer. It runs only in
// a namespace of netns.New's (newNetEnv), so a query the redirect missed
// goes nowhere.
func dnsQueryHelper(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dnsquery SERVER NAME")
		return 2
	}
	if err := netns.Check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	code := 0
	for _, proto := range []string{"udp", "tcp"} {
		m := new(mdns.Msg)
		m.SetQuestion(mdns.Fqdn(args[1]), mdns.TypeA)
		c := &mdns.Client{Net: proto, Timeout: 30 * time.Second}
		resp, _, err := c.Exchange(m, args[0])
		if err != nil {
			fmt.Printf("dnsquery %s %s: %v\n", proto, args[1], err)
			code = 1
			continue
		}
		var answers []string
		for _, rr := range resp.Answer {
			if a, ok := rr.(*mdns.A); ok {
				answers = append(answers, a.A.String())
			}
		}
		fmt.Printf("dnsquery %s %s %s %s\n", proto, args[1], mdns.RcodeToString[resp.Rcode], strings.Join(answers, ","))
		if len(answers) == 0 {
			code = 1
		}
	}
	return code
}

// connectHelper tries one TCP connection to ADDR and prints whether the
// kernel refused it with EPERM (the egress policy) or not ("other": it
// connected, timed out or found no route, which the tests do not care
// about). It runs only in a namespace of netns.New's (newNetEnv).
func connectHelper(args []string) int {
	if len(args) != 1 {
		return 2
	}
	if err := netns.Check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	c, err := net.DialTimeout("tcp", args[0], 2*time.Second)
	switch {
	case err == nil:
		c.Close()
		fmt.Printf("connect %s other\n", args[0])
	case errors.Is(err, syscall.EPERM):
		fmt.Printf("connect %s eperm\n", args[0])
	default:
		fmt.Printf("connect %s other\n", args[0])
	}
	return 0
}

// authZone is what the DNS tests' upstream, a dnstest.Server on 127.0.0.1
// in the test process (outside every session, in the env's namespace),
// answers for the .test names.
var authZone = dnstest.Zone{
	"allowed.test.": {"allowed.test. 300 IN A 192.0.2.10"},
	"other.test.":   {"other.test. 60 IN A 192.0.2.11"},
	"other6.test.":  {"other6.test. 60 IN A 192.0.2.12"},
	"blocked.test.": {"blocked.test. 300 IN A 192.0.2.66"},
}

// hasIPv6Loopback reports whether e's namespace can bind [::1], as the
// DNS proxy does for a session's IPv6 listener.
func (e *env) hasIPv6Loopback() (ok bool) {
	e.do(func() {
		pc, err := net.ListenPacket("udp", "[::1]:0")
		if err == nil {
			pc.Close()
			ok = true
		}
	})
	return ok
}

// startAuthServer starts the upstream in e's namespace.
func (e *env) startAuthServer() (up *dnstest.Server) {
	e.t.Helper()
	e.do(func() { up = dnstest.Start(e.t, "127.0.0.1", authZone) })
	return up
}

// TestRunDNS checks DNS end to end, through the real `sandtrail
// run` and the real BPF redirect: name lookups in the session (getent,
// through whatever nameserver /etc/resolv.conf names, and queries sent
// straight to another resolver address, 192.0.2.53:53) are answered by the
// proxy from its configured upstream and produce net.dns events of the
// session with the query and the answer; a blocked domain gives NXDOMAIN
// and a blocked event, and never reaches the upstream; a connection to an
// address the proxy answered names the domain.
func TestRunDNS(t *testing.T) {
	t.Parallel()
	e := newNetEnv(t)
	up := e.startAuthServer()
	pol := writePolicy(t, "egress:\n  blocked_domains: [blocked.test]\n")
	v6 := e.hasIPv6Loopback()
	lines := []string{
		`getent hosts allowed.test; echo "allowed=$?"`,
		`getent hosts blocked.test; echo "blocked=$?"`,
		strings.Join(helperCmd("dnsquery", "192.0.2.53:53", "other.test"), " ") + `; echo "direct=$?"`,
		strings.Join(helperCmd("connect", "192.0.2.10:80"), " "),
	}
	want := []string{"192.0.2.10", "allowed=0", "blocked=2", "dnsquery udp other.test NOERROR 192.0.2.11",
		"dnsquery tcp other.test NOERROR 192.0.2.11", "direct=0"}
	if v6 {
		lines = append(lines, strings.Join(helperCmd("dnsquery", "[2001:db8::53]:53", "other6.test"), " ")+`; echo "direct6=$?"`)
		want = append(want, "dnsquery udp other6.test NOERROR 192.0.2.12", "dnsquery tcp other6.test NOERROR 192.0.2.12", "direct6=0")
	} else {
		t.Log("no IPv6 loopback: the IPv6 redirect is not tested")
	}
	script := strings.Join(lines, "\n")
	r := e.run("--policy", pol, "--dns-upstream", up.Addr, "--user", "nobody", "--", "sh", "-c", script)
	if r.code != 0 || r.summary.Journal.Status != "intact" {
		t.Fatalf("sandtrail run: exit %d, journal %q, want 0, intact\nstdout:\n%s\nstderr:\n%s", r.code, r.summary.Journal.Status, r.stdout, r.stderr)
	}
	for _, want := range want {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("session output lacks %q:\n%s", want, r.stdout)
		}
	}
	if n := up.Count("blocked.test."); n != 0 {
		t.Errorf("upstream saw %d queries for blocked.test, want 0", n)
	}

	evs := e.events(r.summary.SessionID)
	dnsEvents := kinds(evs, "net.dns")
	find := func(query, qtype, proto string) *event.Event {
		for _, ev := range dnsEvents {
			if d := ev.Net.DNS; d.Query == query && d.QType == qtype && (proto == "" || ev.Net.Proto == proto) {
				return ev
			}
		}
		var seen []string
		for _, ev := range dnsEvents {
			seen = append(seen, fmt.Sprintf("%s/%s/%s/%s", ev.Net.Proto, ev.Net.DNS.Query, ev.Net.DNS.QType, ev.Net.DNS.RCode))
		}
		t.Errorf("no net.dns event for %s %s %s among %v", proto, query, qtype, seen)
		return nil
	}
	check := func(ev *event.Event, verdict, rcode string, answers []event.DNSAnswer) {
		t.Helper()
		if ev == nil {
			return
		}
		n := ev.Net
		if ev.SessionID != r.summary.SessionID || ev.Source != event.SourceKernel || n.Op != "dns" || n.Verdict != verdict ||
			n.DNS.RCode != rcode || !slices.Equal(n.DNS.Answers, answers) {
			t.Errorf("net.dns %s: session %q source %q op %q verdict %q rcode %q answers %v, want %q kernel dns %q %q %v",
				n.DNS.Query, ev.SessionID, ev.Source, n.Op, n.Verdict, n.DNS.RCode, n.DNS.Answers,
				r.summary.SessionID, verdict, rcode, answers)
		}
	}
	// getent, through /etc/resolv.conf's nameserver, redirected.
	check(find("allowed.test", "A", ""), "allowed", "NOERROR", []event.DNSAnswer{{Type: "A", Data: "192.0.2.10", TTL: 300}})
	blocked := find("blocked.test", "A", "")
	check(blocked, "blocked", "NXDOMAIN", nil)
	if blocked != nil && !strings.Contains(blocked.Net.Reason, "blocked.test") {
		t.Errorf("blocked event reason = %q, want one naming blocked.test", blocked.Net.Reason)
	}
	// Straight to other resolver addresses, IPv4 and IPv6, over UDP and
	// TCP. The IPv6 one reaches the session's ::1 listener.
	for _, proto := range []string{"udp", "tcp"} {
		check(find("other.test", "A", proto), "allowed", "NOERROR", []event.DNSAnswer{{Type: "A", Data: "192.0.2.11", TTL: 60}})
		if !v6 {
			continue
		}
		ev := find("other6.test", "A", proto)
		check(ev, "allowed", "NOERROR", []event.DNSAnswer{{Type: "A", Data: "192.0.2.12", TTL: 60}})
		if ev != nil && ev.Net.DstIP != "::1" {
			t.Errorf("net.dns other6.test over %s dst_ip = %q, want ::1 (the session's IPv6 listener)", proto, ev.Net.DstIP)
		}
	}
	// The connection to the answered address names the domain.
	var connect *event.Event
	for _, ev := range kinds(evs, "net.connect") {
		if ev.Net.DstIP == "192.0.2.10" && ev.Net.DstPort == 80 {
			connect = ev
		}
	}
	switch {
	case connect == nil:
		t.Errorf("no net.connect event to 192.0.2.10:80 among %d events", len(evs))
	case connect.Net.Domain != "allowed.test":
		t.Errorf("net.connect to 192.0.2.10:80 domain = %q, want allowed.test", connect.Net.Domain)
	}
	e.verify()
}

// TestDaemonDNS runs two sessions at once through `sandtrail daemon`, each
// asking the same resolver address for its own name: each lookup is
// recorded in its own session only (the proxy attributes by the session's
// listeners), and the daemon's policy (SANDTRAIL_POLICY) blocks a domain.
func TestDaemonDNS(t *testing.T) {
	t.Parallel()
	e := newNetEnv(t)
	_, _, stop := startDNSDaemon(t, e, "egress:\n  blocked_domains: [blocked.test]\n")
	defer stop()

	names := []string{"allowed.test", "other.test"}
	var runs []<-chan ran
	for _, name := range names {
		script := strings.Join(helperCmd("dnsquery", "192.0.2.53:53", name), " ") +
			`; q=$?; getent hosts blocked.test; echo "blocked=$?"; exit $q`
		runs = append(runs, e.startRun("--user", "nobody", "--", "sh", "-c", script))
	}
	bySession := map[string]string{} // session id → the name it asked for
	for _, done := range runs {
		rr := <-done
		if rr.err != nil {
			t.Fatal(rr.err)
		}
		r := rr.r
		if r.code != 0 || r.summary.HostedBy != "daemon" || !strings.Contains(r.stdout, "blocked=2") {
			t.Fatalf("sandtrail run via the daemon: exit %d, hosted by %q, want 0, daemon, blocked=2\nstdout:\n%s\nstderr:\n%s",
				r.code, r.summary.HostedBy, r.stdout, r.stderr)
		}
		for _, name := range names {
			if strings.Contains(r.stdout, "dnsquery udp "+name+" NOERROR") {
				bySession[r.summary.SessionID] = name
			}
		}
	}
	if len(bySession) != len(names) {
		t.Fatalf("sessions and their names = %v, want %d sessions", bySession, len(names))
	}
	stop()
	for id, name := range bySession {
		var got []string
		blocked := 0
		for _, ev := range kinds(e.events(id), "net.dns") {
			if ev.Net.DNS.Query == "blocked.test" {
				if ev.Net.Verdict == "blocked" && ev.Net.DNS.RCode == "NXDOMAIN" {
					blocked++
				}
				continue
			}
			got = append(got, ev.Net.Proto+" "+ev.Net.DNS.Query)
		}
		// Each event is emitted after its answer was written: the UDP one
		// may be journaled after the TCP one.
		slices.Sort(got)
		want := []string{"tcp " + name, "udp " + name}
		if !slices.Equal(got, want) {
			t.Errorf("session %s: net.dns queries %q, want %q", id, got, want)
		}
		if blocked == 0 {
			t.Errorf("session %s: no blocked NXDOMAIN event for blocked.test", id)
		}
	}
	e.verify()
}

// startDNSDaemon starts an upstream (startAuthServer) and `sandtrail daemon` with it as
// the DNS upstream and a policy file of policy, and waits for its control
// socket. stop ends the daemon with SIGTERM (once) and fails the test if it
// does not end well.
func startDNSDaemon(t *testing.T, e *env, policy string) (up *dnstest.Server, d *exec.Cmd, stop func()) {
	t.Helper()
	up = e.startAuthServer()
	pol := writePolicy(t, policy)
	d = e.cmd("daemon", "--dns-upstream", up.Addr)
	d.Env = append(d.Env, "SANDTRAIL_POLICY="+pol)
	var (
		dlog strings.Builder
		dmu  sync.Mutex
	)
	d.Stdout = writerFunc(func(b []byte) (int, error) { dmu.Lock(); defer dmu.Unlock(); return dlog.Write(b) })
	d.Stderr = d.Stdout
	if err := e.start(d); err != nil {
		t.Fatal(err)
	}
	daemonDone := make(chan error, 1)
	go func() { daemonDone <- d.Wait() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = d.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-daemonDone:
				if err != nil {
					dmu.Lock()
					t.Errorf("daemon: %v\n%s", err, dlog.String())
					dmu.Unlock()
				}
			case <-time.After(60 * time.Second):
				_ = d.Process.Kill()
				t.Errorf("daemon did not stop on SIGTERM")
			}
		})
	}
	ctl := filepath.Join(filepath.Dir(e.sock), "control.sock")
	waitFor(t, "the control socket", func() bool { _, err := os.Stat(ctl); return err == nil })
	return up, d, stop
}

// udpListenPorts returns the ports of the UDP sockets of process pid bound
// to 127.0.0.1 and not connected: the DNS proxy's IPv4 session listeners,
// for a daemon.
func udpListenPorts(t *testing.T, pid int) []uint16 {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/udp", pid))
	if err != nil {
		t.Fatal(err)
	}
	var ports []uint16
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		// sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode
		if len(f) < 10 || !inodes[f[9]] || f[2] != "00000000:0000" {
			continue
		}
		host, port, ok := strings.Cut(f[1], ":")
		if !ok || host != "0100007F" {
			continue
		}
		var p uint16
		if _, err := fmt.Sscanf(port, "%X", &p); err == nil {
			ports = append(ports, p)
		}
	}
	return ports
}

// TestDaemonDNSForeignListener: a session that sends a query straight to
// another session's proxy listener (not to port 53, so not redirected) is
// refused, and the query is recorded in the sender's own session, blocked,
// never in the other's.
func TestDaemonDNSForeignListener(t *testing.T) {
	t.Parallel()
	e := newNetEnv(t)
	up, d, stop := startDNSDaemon(t, e, "egress: {}\n")
	defer stop()

	// Session B waits for a file in its workdir (its /tmp is private)
	// while A probes its listener.
	bDone := e.startRun(append([]string{"--user", "nobody", "--"}, helperCmd("waitfile", "release")...)...)
	defer e.release("release")
	var ports []uint16
	waitFor(t, "session B's DNS listener", func() bool {
		ports = udpListenPorts(t, d.Process.Pid)
		return len(ports) == 1
	})
	foreign := fmt.Sprintf("127.0.0.1:%d", ports[0])

	a := e.run("--user", "nobody", "--", "sh", "-c", strings.Join(helperCmd("dnsquery", foreign, "probe.test"), " ")+`; echo "probe=$?"`)
	if a.code != 0 || !strings.Contains(a.stdout, "dnsquery udp probe.test REFUSED") ||
		!strings.Contains(a.stdout, "dnsquery tcp probe.test REFUSED") || !strings.Contains(a.stdout, "probe=1") {
		t.Errorf("session A querying B's listener %s: exit %d, want REFUSED over udp and tcp\nstdout:\n%s\nstderr:\n%s",
			foreign, a.code, a.stdout, a.stderr)
	}
	e.release("release")
	b := <-bDone
	if b.err != nil {
		t.Fatal(b.err)
	}
	if up.Count("probe.test.") != 0 {
		t.Errorf("upstream saw %d queries for probe.test, want 0", up.Count("probe.test."))
	}
	stop()

	var inA []string
	for _, ev := range kinds(e.events(a.summary.SessionID), "net.dns") {
		n := ev.Net
		if n.DNS.Query != "probe.test" {
			continue
		}
		inA = append(inA, n.Proto)
		if n.Verdict != "blocked" || n.DNS.RCode != "REFUSED" || !strings.Contains(n.Reason, b.r.summary.SessionID) {
			t.Errorf("session A's probe.test event: verdict %q rcode %q reason %q, want blocked, REFUSED, naming session %s",
				n.Verdict, n.DNS.RCode, n.Reason, b.r.summary.SessionID)
		}
	}
	slices.Sort(inA)
	if want := []string{"tcp", "udp"}; !slices.Equal(inA, want) {
		t.Errorf("session A's probe.test events over %q, want %q", inA, want)
	}
	for _, ev := range kinds(e.events(b.r.summary.SessionID), "net.dns") {
		t.Errorf("session B has a net.dns event it did not cause: %s %s", ev.Net.DNS.Query, ev.Net.Verdict)
	}
	e.verify()
}

// TestRunDNSEgress checks that the proxy's answers reach the kernel's
// egress rules before the agent can use them: with egress.default block and
// allowed.test allowed, a connection to allowed.test's address is refused
// (EPERM) before the session looked the name up and goes out after it,
// while the address of a name that is not allowed stays refused.
func TestRunDNSEgress(t *testing.T) {
	t.Parallel()
	e := newNetEnv(t)
	up := e.startAuthServer()
	pol := writePolicy(t, "egress:\n  default: block\n  allowed_domains: [allowed.test]\n")
	connect := func(addr string) string { return strings.Join(helperCmd("connect", addr), " ") }
	script := strings.Join([]string{
		connect("192.0.2.10:80") + " | sed 's/^/before: /'",
		`getent hosts allowed.test >/dev/null; echo "allowed=$?"`,
		`getent hosts other.test >/dev/null; echo "other=$?"`,
		connect("192.0.2.10:80") + " | sed 's/^/after: /'",
		connect("192.0.2.11:80") + " | sed 's/^/after: /'",
	}, "\n")
	r := e.run("--policy", pol, "--dns-upstream", up.Addr, "--user", "nobody", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"before: connect 192.0.2.10:80 eperm", "allowed=0", "other=0",
		"after: connect 192.0.2.10:80 other", "after: connect 192.0.2.11:80 eperm"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("session output lacks %q:\n%s", want, r.stdout)
		}
	}
	// The records agree: blocked without a domain (the kernel decided it
	// before the lookup, so neither the domain nor the reason may come from
	// the answer that arrived later), then allowed with the domain.
	var verdicts []string
	for _, ev := range kinds(e.events(r.summary.SessionID), "net.connect") {
		if ev.Net.DstIP != "192.0.2.10" || ev.Net.DstPort != 80 {
			continue
		}
		verdicts = append(verdicts, ev.Net.Verdict)
		if ev.Net.Verdict == "allowed" && ev.Net.Domain != "allowed.test" {
			t.Errorf("allowed net.connect to 192.0.2.10:80 domain = %q, want allowed.test", ev.Net.Domain)
		}
		if ev.Net.Verdict == "blocked" && (ev.Net.Domain != "" || !strings.Contains(ev.Net.Reason, "egress.default") && !strings.Contains(ev.Net.Reason, "default block")) {
			t.Errorf("blocked net.connect to 192.0.2.10:80 before the lookup: domain %q, reason %q; want no domain and the default's reason", ev.Net.Domain, ev.Net.Reason)
		}
	}
	if want := []string{"blocked", "allowed"}; !slices.Equal(verdicts, want) {
		t.Errorf("net.connect verdicts to 192.0.2.10:80 = %q, want %q", verdicts, want)
	}
	e.verify()
}
