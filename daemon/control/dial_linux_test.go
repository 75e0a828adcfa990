package control

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/collector/session/launch"
)

// TestDialRefusesAServerThatIsNotRoot serves a control socket as uid
// nobody (the uid the kernel records at listen, SO_PEERCRED) and checks
// that Dial and Run refuse it with ErrNotRoot, not ErrNoDaemon (with which
// run would host the session itself), and that the server never gets a
// request.
func TestDialRefusesAServerThatIsNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it serves a socket as another uid")
	}
	// Not t.TempDir, whose parent is root's 0700.
	dir, err := os.MkdirTemp("", "sandtrail-control-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "control.sock")
	ln := listenAs(t, path, 65534)
	defer ln.Close()
	got := make(chan int, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n, _ := c.Read(make([]byte, 1))
			c.Close()
			got <- n
		}
	}()
	if _, err := Dial(path); !errors.Is(err, ErrNotRoot) {
		t.Errorf("Dial(a socket nobody serves) = %v, want ErrNotRoot", err)
	}
	ran := make(chan error, 1)
	go func() {
		res, err := Run(t.Context(), path, &launch.Request{Argv: []string{"true"}}, [3]*os.File{os.Stdin, os.Stdout, os.Stderr}, nil)
		if res != nil {
			err = errors.Join(err, errors.New("a result"))
		}
		ran <- err
	}()
	select {
	case err := <-ran:
		if !errors.Is(err, ErrNotRoot) {
			t.Errorf("Run(a socket nobody serves) = %v, want ErrNotRoot", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("Run(a socket nobody serves) is still waiting for it after 10 s, want ErrNotRoot at once")
	}
	ln.Close()
	for len(got) > 0 {
		if n := <-got; n > 0 {
			t.Errorf("the server that is not root read %d bytes of a request", n)
		}
	}
}

// listenAs listens on path with the effective uid set to uid on one
// thread only (a raw setresuid), so that the socket's credentials are
// uid's.
func listenAs(t *testing.T, path string, uid int) *net.UnixListener {
	t.Helper()
	type result struct {
		ln  *net.UnixListener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); errno != 0 {
			ch <- result{err: errno}
			return
		}
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listening as uid %d: %v", uid, r.err)
	}
	return r.ln
}
