package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// TestRunDNSSender checks that a DNS query is recorded with its sender:
// in a real `sandtrail run`, the net.dns of a `getent hosts` (glibc's
// resolver, through resolv.conf's nameserver, redirected) names getent's
// pid, uid and comm, and so do the net.dns of a helper's queries sent
// straight to other resolver addresses (127.0.0.53:53, and [::1]:53 when
// there is IPv6 loopback) over UDP and TCP: each is the process that
// execed, as its process.exec event says.
func TestRunDNSSender(t *testing.T) {
	t.Parallel()
	e := newNetEnv(t)
	up := e.startAuthServer()
	servers := map[string]string{"127.0.0.53:53": "other.test"}
	if e.hasIPv6Loopback() {
		servers["[::1]:53"] = "other6.test"
	} else {
		t.Log("no IPv6 loopback: queries to [::1]:53 are not tested")
	}
	lines := []string{`getent hosts allowed.test; echo "getent=$?"`}
	for server, name := range servers {
		lines = append(lines, strings.Join(helperCmd("dnsquery", server, name), " ")+`; echo "direct=$?"`)
	}
	r := e.run("--dns-upstream", up.Addr, "--user", "nobody", "--", "sh", "-c", strings.Join(lines, "\n"))
	if r.code != 0 || r.summary.Journal.Status != "intact" {
		t.Fatalf("sandtrail run: exit %d, journal %q, want 0, intact\nstdout:\n%s\nstderr:\n%s", r.code, r.summary.Journal.Status, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "getent=0") || strings.Count(r.stdout, "direct=0") != len(servers) {
		t.Fatalf("session output lacks getent=0 and %d direct=0:\n%s", len(servers), r.stdout)
	}

	evs := e.events(r.summary.SessionID)
	// execOf is the last process.exec event whose argv holds arg: the
	// helper's, not that of the env that execs it.
	execOf := func(arg string) *event.Event {
		var last *event.Event
		for _, ev := range kinds(evs, "process.exec") {
			if ev.Proc != nil && slices.Contains(ev.Proc.Argv, arg) {
				last = ev
			}
		}
		if last == nil {
			t.Fatalf("no process.exec with %q in its argv", arg)
		}
		return last
	}
	// checkSender wants each net.dns for name over proto ("" for any)
	// sent by the process of exec, and at least one.
	checkSender := func(name, proto string, exec *event.Event) {
		t.Helper()
		n := 0
		for _, ev := range kinds(evs, "net.dns") {
			if ev.Net.DNS.Query != name || (proto != "" && ev.Net.Proto != proto) {
				continue
			}
			n++
			if got := senderString(ev.Proc); got != senderString(exec.Proc) {
				t.Errorf("net.dns %s over %s from %s:%d: sender %s, want %s", name, ev.Net.Proto, ev.Net.SrcIP, ev.Net.SrcPort, got, senderString(exec.Proc))
			}
		}
		if n == 0 {
			t.Errorf("no net.dns for %s over %q", name, proto)
		}
	}
	checkSender("allowed.test", "", execOf("allowed.test"))
	for server, name := range servers {
		exec := execOf(server)
		for _, proto := range []string{"udp", "tcp"} {
			checkSender(name, proto, exec)
		}
	}
	e.verify()
}

// senderString is the pid, uid and comm of p, for comparing a net.dns's
// sender with a process.exec.
func senderString(p *event.Proc) string {
	if p == nil {
		return "none"
	}
	uid := "none"
	if p.UID != nil {
		uid = fmt.Sprint(*p.UID)
	}
	return fmt.Sprintf("pid %d uid %s comm %q", p.Pid, uid, p.Comm)
}
