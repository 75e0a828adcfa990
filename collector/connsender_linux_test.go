//go:build 386 || amd64 || arm64

package collector

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/kernel/peercred"
)

func init() { helperModes["tcp-hold"] = helperTCPHold }

// helperTCPHold connects to args[0] and holds the connection until its
// stdin closes.
func helperTCPHold(args []string) int {
	c, err := net.Dial("tcp", args[0])
	if err != nil {
		return 1
	}
	defer c.Close()
	_, _ = os.Stdin.Read(make([]byte, 1))
	return 0
}

// TestConnSender: the process behind a session's open TCP connection is
// found by its socket's cookie, as sock_diag gives it to the other end (the
// mirror names the process behind a fetch this way).
func TestConnSender(t *testing.T) {
	requireKernel(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cg := cgrouptest.New(t)
	r := startRecorder(t, false)
	const sid = "sess-conn"
	if err := r.c.Watch(cg.ID, sid); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sandtrail-conn-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := dir + "/helper"
	copyFile(t, self, helper)
	cmd := exec.Command(helper, ln.Addr().String())
	cmd.Env = append(os.Environ(), helperEnv+"=tcp-hold")
	cmd.SysProcAttr = cg.SysProcAttr(t, nobody)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := netip.MustParseAddrPort(conn.RemoteAddr().String())
	server := netip.MustParseAddrPort(conn.LocalAddr().String())
	s, err := peercred.SocketOf("tcp", client, server)
	if err != nil {
		t.Fatalf("SocketOf: %v", err)
	}
	p, session, ok := r.c.ConnSender(s.Cookie)
	if !ok || p.Pid != int32(cmd.Process.Pid) || session != sid || p.UID == nil || *p.UID != nobody {
		t.Errorf("ConnSender = %+v, %q, %v; want pid %d of session %s, uid %d", p, session, ok, cmd.Process.Pid, sid, nobody)
	}
	if _, _, ok := r.c.ConnSender(s.Cookie + 1); ok {
		t.Errorf("ConnSender found a process for a cookie that is no recorded connection")
	}
}
