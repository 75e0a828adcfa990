package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/test/testnet"
)

// unixDialHelper takes "TYPE ADDR" arguments (TYPE stream or dgram, ADDR a
// path or @name for an abstract name) and, for each, connects a stream
// socket to ADDR (and writes a byte, whose result it ignores), or sends a datagram to ADDR, printing
// "TYPE ADDR RESULT": OK or the errno's name.
func unixDialHelper(args []string) int {
	for ; len(args) >= 2; args = args[2:] {
		fmt.Println(args[0], args[1], unixDial(args[0], args[1]))
	}
	return 0
}

func unixDial(typ, addr string) string {
	name := addr
	if rest, ok := strings.CutPrefix(addr, "@"); ok {
		name = "\x00" + rest
	}
	st := syscall.SOCK_STREAM
	if typ == "dgram" {
		st = syscall.SOCK_DGRAM
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, st|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return "socket:" + err.Error()
	}
	defer syscall.Close(fd)
	sa := &syscall.SockaddrUnix{Name: name}
	if typ == "dgram" {
		err = syscall.Sendto(fd, []byte("x"), 0, sa)
	} else if err = syscall.Connect(fd, sa); err == nil {
		// The host's listener closes each connection once accepted, so the
		// write may race with that close (EPIPE): the connect is the test.
		syscall.Write(fd, []byte("x"))
	}
	var en syscall.Errno
	switch {
	case err == nil:
		return "OK"
	case errors.As(err, &en):
		return errnoName(en)
	}
	return err.Error()
}

// rawSockHelper creates a packet socket, a raw IPv4 socket and an ICMP
// echo socket and prints "packet RESULT", "inet RESULT" and "ping RESULT":
// OK or the errno's name.
func rawSockHelper([]string) int {
	for _, s := range []struct {
		name                  string
		family, protocol, typ int
	}{
		{"packet", syscall.AF_PACKET, 0x0300, syscall.SOCK_RAW}, // htons(ETH_P_ALL)
		{"inet", syscall.AF_INET, syscall.IPPROTO_ICMP, syscall.SOCK_RAW},
		// An ICMP echo socket, whose sends pass no cgroup sendmsg hook.
		{"ping", syscall.AF_INET, syscall.IPPROTO_ICMP, syscall.SOCK_DGRAM},
	} {
		fd, err := syscall.Socket(s.family, s.typ|syscall.SOCK_CLOEXEC, s.protocol)
		res := "OK"
		var en syscall.Errno
		if errors.As(err, &en) {
			res = errnoName(en)
		} else {
			syscall.Close(fd)
		}
		fmt.Println(s.name, res)
	}
	return 0
}

// unixListeners starts, on the host, a stream listener on a pathname
// socket (in a directory the agent may reach), a stream listener on an
// abstract name and a datagram socket on another abstract name, each
// counting what reaches it. It returns their addresses as the helper
// takes them.
func unixListeners(t *testing.T) (addrs []string, counts []*atomic.Int64) {
	t.Helper()
	// Not beneath /tmp: a session's /tmp is its own (an overlay, through
	// which a host socket cannot be reached).
	dir, err := os.MkdirTemp("/run", "sandtrail-e2e-unix-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "host.sock")
	ln, n := testnet.StartCountingServer(t, "unix", path)
	_ = ln
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	abstract := fmt.Sprintf("@sandtrail-e2e-%d-%s", os.Getpid(), t.Name())
	_, na := testnet.StartCountingServer(t, "unix", abstract)
	dgram := abstract + "-dgram"
	var pc *net.UnixConn
	pc, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: dgram, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var nd atomic.Int64
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			nd.Add(1)
		}
	}()
	return []string{"stream", path, "stream", abstract, "dgram", dgram}, []*atomic.Int64{n, na, &nd}
}

// unixRun runs the unixdial helper on addrs as the agent, then `sandtrail
// emit` from inside the session (a shim's use of the ingest socket), under
// the policy pol ("" for the default one).
func unixRun(t *testing.T, e *env, pol string, addrs []string) result {
	t.Helper()
	cmd := strings.Join(helperCmd("unixdial", addrs...), " ") + " && " + bin + " --data \"$HOME\" emit tool --session \"$SANDTRAIL_SESSION_ID\" --name unix-check --status ok"
	args := []string{"--user", "sandtrail-agent"}
	if pol != "" {
		args = append(args, "--policy", pol)
	}
	r := e.run(append(args, "--", "/bin/sh", "-c", cmd)...)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	return r
}

// checkUnixRecord checks that each address of addrs (TYPE ADDR pairs) has
// one net.connect (stream) or net.send (dgram) event with proto unix, the
// address and verdict, and that the session's emit went through the
// ingest socket.
func checkUnixRecord(t *testing.T, e *env, r result, addrs []string, verdict string) {
	t.Helper()
	evs := e.events(r.summary.SessionID)
	pid := helperPid(t, evs, "unixdial")
	for i := 0; i < len(addrs); i += 2 {
		kind, typ := event.KindNetConnect, "stream"
		if addrs[i] == "dgram" {
			kind, typ = event.KindNetSend, "dgram"
		}
		var got []string
		for _, ev := range kinds(evs, kind) {
			if n := ev.Net; ev.Proc.Pid == pid && n.Proto == "unix" && n.UnixPath == addrs[i+1] {
				got = append(got, n.Verdict+" "+n.SockType)
				if verdict != "allowed" && n.Reason == "" {
					t.Errorf("%s %s: %s event without a reason", addrs[i], addrs[i+1], kind)
				}
			}
		}
		if want := verdict + " " + typ; len(got) != 1 || got[0] != want {
			t.Errorf("%s %s: %s events %q, want one %q", addrs[i], addrs[i+1], kind, got, want)
		}
	}
	var emitted bool
	for _, ev := range kinds(evs, event.KindToolInvoke) {
		emitted = emitted || ev.Tool.Name == "unix-check"
	}
	if !emitted {
		t.Errorf("no tool.invoke unix-check from the session's emit: the ingest socket was not reached\n%s", r.stderr)
	}
}

// TestRunUnixSockets: the agent's connects and sends to
// a host process's unix sockets, pathname and abstract, are recorded with
// the address; under a policy with egress.unix.default block they fail
// with EPERM, are recorded blocked, and the host's sockets receive
// nothing, while the daemon's own ingest socket still works from the
// session.
func TestRunUnixSockets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addrs, counts := unixListeners(t)

	r := unixRun(t, e, "", addrs)
	for i := 0; i < len(addrs); i += 2 {
		line := addrs[i] + " " + addrs[i+1] + " OK\n"
		if !strings.Contains(r.stdout, line) {
			t.Errorf("default policy: want %q in the session output:\n%s", line, r.stdout)
		}
	}
	checkUnixRecord(t, e, r, addrs, "allowed")
	waitCounts(t, counts, 1)

	pol := writePolicy(t, "egress:\n  unix:\n    default: block\n")
	r = unixRun(t, e, pol, addrs)
	for i := 0; i < len(addrs); i += 2 {
		line := addrs[i] + " " + addrs[i+1] + " EPERM\n"
		if !strings.Contains(r.stdout, line) {
			t.Errorf("unix.default block: want %q in the session output:\n%s", line, r.stdout)
		}
	}
	checkUnixRecord(t, e, r, addrs, "blocked")
	time.Sleep(100 * time.Millisecond)
	for i, n := range counts {
		if got := n.Load(); got != 1 {
			t.Errorf("%s: the host's socket got %d connections or datagrams in all, want 1 (none from the blocked session)", addrs[2*i+1], got)
		}
	}
	e.verify()
}

// waitCounts waits until every counter is at least want.
func waitCounts(t *testing.T, counts []*atomic.Int64, want int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ok := true
		for _, n := range counts {
			ok = ok && n.Load() >= want
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the host's unix sockets did not all receive %d in 5 s", want)
		}
	}
}

// rawRun runs the rawsock helper as user under the policy pol ("" for the
// default one) and returns its output and the helper's net.socket events by
// family (raw sockets) or family/type ("inet/dgram": the ping socket).
func rawRun(t *testing.T, e *env, user, pol string) (string, map[string]*event.Net) {
	t.Helper()
	args := []string{"--user", user}
	if pol != "" {
		args = append(args, "--policy", pol)
	}
	r := e.run(append(append(args, "--"), helperCmd("rawsock")...)...)
	if r.code != 0 {
		t.Fatalf("sandtrail run: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	evs := e.events(r.summary.SessionID)
	pid := helperPid(t, evs, "rawsock")
	got := map[string]*event.Net{}
	for _, ev := range kinds(evs, event.KindNetSocket) {
		if ev.Proc.Pid != pid {
			continue
		}
		k := ev.Net.Family
		if ev.Net.SockType != "raw" {
			k += "/" + ev.Net.SockType
		}
		if got[k] != nil {
			t.Errorf("two net.socket events of %s", k)
		}
		got[k] = ev.Net
	}
	return r.stdout, got
}

// TestRunRawSockets: the agent's
// socket(AF_PACKET, SOCK_RAW) and socket(AF_INET, SOCK_RAW), which the
// kernel refuses it, are recorded as net.socket with errno EPERM; a root
// session creates a raw IPv4 socket, recorded allowed, unless the policy
// says egress.raw_sockets: block, which refuses it (EPERM, blocked); its
// packet socket is recorded either way.
func TestRunRawSockets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, got := rawRun(t, e, "sandtrail-agent", "")
	for _, fam := range []string{"packet", "inet"} {
		if !strings.Contains(out, fam+" EPERM\n") {
			t.Errorf("agent's %s raw socket: want EPERM in the output:\n%s", fam, out)
		}
		n := got[fam]
		if n == nil || n.SockType != "raw" || n.Errno != "EPERM" || n.Verdict != "allowed" {
			t.Errorf("agent's %s raw socket: net.socket %+v, want sock_type raw, errno EPERM, verdict allowed", fam, n)
		}
	}
	if n := got["packet"]; n != nil && n.Protocol != 0x0300 {
		t.Errorf("packet socket's protocol = %d, want %d", n.Protocol, 0x0300)
	}
	// The ping socket is recorded whether net.ipv4.ping_group_range lets
	// the agent have it (OK) or not (EACCES).
	if n := got["inet/dgram"]; n == nil || n.Protocol != syscall.IPPROTO_ICMP || (n.Errno == "") != strings.Contains(out, "ping OK\n") {
		t.Errorf("agent's ping socket: net.socket %+v, want one of protocol 1 with the errno the helper saw:\n%s", n, out)
	}

	out, got = rawRun(t, e, "root", "")
	if n := got["inet"]; !strings.Contains(out, "inet OK\n") || n == nil || n.Errno != "" || n.Verdict != "allowed" {
		t.Errorf("root's raw IPv4 socket: output\n%s\nnet.socket %+v, want OK and verdict allowed", out, n)
	}

	pol := writePolicy(t, "egress:\n  raw_sockets: block\n")
	out, got = rawRun(t, e, "root", pol)
	if n := got["inet"]; !strings.Contains(out, "inet EPERM\n") || n == nil || n.Errno != "EPERM" || n.Verdict != "blocked" || n.Reason == "" {
		t.Errorf("root's raw IPv4 socket under raw_sockets block: output\n%s\nnet.socket %+v, want EPERM, verdict blocked with a reason", out, n)
	}
	// The kernel runs the sock_create hook for inet and inet6 only: a
	// packet socket that the kernel allows is recorded, not refused.
	if n := got["packet"]; n == nil || n.SockType != "raw" {
		t.Errorf("root's packet socket under raw_sockets block: net.socket %+v, want one recorded", n)
	}
	e.verify()
}
