package attributiontest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

const (
	envHandoff = "SANDTRAIL_TEST_ATTRIBUTION_HANDOFF"
	envHold    = "SANDTRAIL_TEST_ATTRIBUTION_HOLD"
)

// Main runs the helper process when the test binary was started as one by
// Handoff or Hold, and then exits; otherwise it returns at once.
func Main() {
	var err error
	switch {
	case os.Getenv(envHandoff) != "":
		err = handoff(os.Getenv(envHandoff))
	case os.Getenv(envHold) != "":
		err = hold(os.Getenv(envHold))
	default:
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "attributiontest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// hold connects to sock, says so on stdout, and keeps the connection
// until stdin closes.
func hold(sock string) error {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := os.Stdout.Write([]byte{'\n'}); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// Hold has a helper process (the test binary, through Main) connect to the
// unix socket sock and keep the connection until stop is called or the
// test ends; it returns once the helper has connected, with the helper's
// pid. stop ends the helper and waits for it, so that its pid is free.
// attr, when not nil, starts the helper (in a cgroup, as a user).
func Hold(tb testing.TB, sock string, attr *syscall.SysProcAttr) (pid int, stop func()) {
	tb.Helper()
	cmd := exec.Command(PublicBinary(tb))
	cmd.Env = append(os.Environ(), envHold+"="+sock)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = attr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { stdin.Close(); _ = cmd.Wait() }) }
	tb.Cleanup(stop)
	if _, err := stdout.Read(make([]byte, 1)); err != nil {
		tb.Fatalf("hold process did not connect: %v", err)
	}
	return cmd.Process.Pid, stop
}

// handoff connects to sock, passes the connection over fd 3 (a unix
// socket to the parent) and returns.
func handoff(sock string) error {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return err
	}
	f, err := c.(*net.UnixConn).File()
	if err != nil {
		return err
	}
	pc, err := net.FileConn(os.NewFile(3, "parent"))
	if err != nil {
		return err
	}
	_, _, err = pc.(*net.UnixConn).WriteMsgUnix([]byte{1}, syscall.UnixRights(int(f.Fd())), nil)
	return err
}

// Handoff has a helper process (the test binary, through Main) connect to
// the unix socket sock, hand the connection
// to this process and exit. It returns the connection, whose peer
// credentials name the helper, and the helper's pid, which is free to be
// recycled once Handoff returns. attr, when not nil, starts the helper (in
// a cgroup, as a user).
func Handoff(tb testing.TB, sock string, attr *syscall.SysProcAttr) (*net.UnixConn, int) {
	tb.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "mine"), os.NewFile(uintptr(fds[1]), "theirs")
	defer mine.Close()
	cmd := exec.Command(PublicBinary(tb))
	cmd.Env = append(os.Environ(), envHandoff+"="+sock)
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = attr
	err = cmd.Run()
	theirs.Close()
	if err != nil {
		tb.Fatalf("handoff process: %v", err)
	}
	return Received(tb, fds[0]), cmd.Process.Pid
}

// Received reads a connection that another process passed (SCM_RIGHTS) on
// the unix socket fd, and closes it when the test ends.
func Received(tb testing.TB, fd int) *net.UnixConn {
	tb.Helper()
	buf, oob := make([]byte, 1), make([]byte, syscall.CmsgSpace(4))
	_, oobn, _, _, err := syscall.Recvmsg(fd, buf, oob, 0)
	if err != nil {
		tb.Fatal(err)
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		tb.Fatalf("parsing the handed connection's control message: %v", err)
	}
	got, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(got) != 1 {
		tb.Fatalf("parsing the handed connection's rights: %v", err)
	}
	f := os.NewFile(uintptr(got[0]), "handed")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c.(*net.UnixConn)
}

// PublicBinary returns a copy of the test binary that every user may run
// (the go command builds it in a directory of root's alone), removed when
// the test ends: for helper processes that run as another uid.
func PublicBinary(tb testing.TB) string {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "attributiontest")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "helper")
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		tb.Fatal(err)
	}
	return bin
}

// ReusePid tries to start a process that gets pid, so that a stale pid
// names someone else, by setting ns_last_pid (root only); attr, when not
// nil, starts it (in another session's cgroup, say). Other processes on
// the machine race for pids, so it tries a few times and reports whether
// it succeeded; the process runs until the test ends.
func ReusePid(tb testing.TB, pid int, attr *syscall.SysProcAttr) bool {
	tb.Helper()
	for range 50 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			tb.Logf("cannot set ns_last_pid: %v", err)
			return false
		}
		cmd := exec.Command("sleep", "3600")
		cmd.SysProcAttr = attr
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		if cmd.Process.Pid == pid {
			tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			return true
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	return false
}
