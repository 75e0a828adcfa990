package peercred

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRead: the server side of a unix connection reads the client's pid,
// uid and gid, and a pidfd when asked for one and the kernel has it.
func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for _, pidfd := range []bool{false, true} {
		cr, err := Read(sc, pidfd)
		if err != nil {
			t.Fatalf("Read(pidfd %v) = %v", pidfd, err)
		}
		if cr.Pid != int32(os.Getpid()) || cr.UID != uint32(os.Getuid()) || cr.GID != uint32(os.Getgid()) {
			t.Errorf("Read(pidfd %v) = %+v, want pid %d uid %d gid %d", pidfd, cr, os.Getpid(), os.Getuid(), os.Getgid())
		}
		if !pidfd && cr.Pidfd != -1 {
			t.Errorf("Read(pidfd false).Pidfd = %d, want -1", cr.Pidfd)
		}
		if cr.Pidfd >= 0 {
			if err := unix.PidfdSendSignal(cr.Pidfd, 0, nil, 0); err != nil {
				t.Errorf("signal 0 through the pidfd: %v", err)
			}
			unix.Close(cr.Pidfd)
		}
	}
}
