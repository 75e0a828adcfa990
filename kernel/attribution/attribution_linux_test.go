package attribution_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/kernel/attribution/attributiontest"
	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
)

func TestMain(m *testing.M) {
	attributiontest.Main()
	os.Exit(m.Run())
}

// table is a session table.
type table map[uint64]string

func (t table) Lookup(id uint64) (string, bool) { s, ok := t[id]; return s, ok }

// listen serves a unix socket that everyone may connect to.
func listen(t *testing.T) (*net.UnixListener, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "attribution")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	return ln, sock
}

// accept accepts the connection a helper made.
func accept(t *testing.T, ln *net.UnixListener) *net.UnixConn {
	t.Helper()
	c, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestAttribute: a peer in a session's cgroup, or in a cgroup nested in
// it, is that session's, with its uid and its own cgroup id, root or not;
// a peer in a cgroup no session owns is in none.
func TestAttribute(t *testing.T) {
	sess := cgrouptest.New(t)
	nested := sess.Child(t, "nested")
	other := cgrouptest.New(t)
	a := attribution.New(table{sess.ID: "s1"})
	ln, sock := listen(t)
	for _, tt := range []struct {
		name    string
		cg      *cgrouptest.Cgroup
		uid     int
		session string
	}{
		{"session cgroup", sess, 65534, "s1"},
		{"nested cgroup", nested, 65534, "s1"},
		{"root in the session", nested, 0, "s1"},
		{"no session's cgroup", other, 65534, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pid, _ := attributiontest.Hold(t, sock, tt.cg.SysProcAttr(t, tt.uid))
			c := accept(t, ln)
			got, err := a.Unix(c)
			want := attribution.Attribution{Pid: int32(pid), UID: uint32(tt.uid), CgroupID: tt.cg.ID, Session: tt.session}
			if err != nil || got != want {
				t.Errorf("Unix() = %+v, %v, want %+v", got, err, want)
			}
		})
	}
}

// TestPeerGone: once the process that connected has exited, its
// connection is attributed to nobody, even after another process took its
// pid: Open or Attribute fails with ErrPeerGone, with a pidfd and by the
// start time alike.
func TestPeerGone(t *testing.T) {
	sess, other := cgrouptest.New(t), cgrouptest.New(t)
	sessions := table{sess.ID: "s1", other.ID: "s2"}
	a := map[string]*attribution.Attributor{
		"pidfd":      attribution.New(sessions),
		"start time": attribution.New(sessions, attribution.WithoutPidfd()),
	}
	ln, sock := listen(t)
	for _, name := range []string{"pidfd", "start time"} {
		t.Run(name, func(t *testing.T) {
			pid, stop := attributiontest.Hold(t, sock, sess.SysProcAttr(t, 65534))
			c := accept(t, ln)
			p, err := a[name].Open(c)
			if err != nil {
				t.Fatalf("Open() of a live peer = %v", err)
			}
			defer p.Close()
			if at, err := a[name].Attribute(p); err != nil || at.Session != "s1" {
				t.Fatalf("Attribute() of a live peer = %+v, %v, want session s1", at, err)
			}
			// End the helper and give its pid to a process of session
			// s2. The start time counts clock ticks (10 ms): a pid
			// recycled within its first owner's tick is not told apart
			// without a pidfd (docs/ingest.md), so recycle it later.
			stop()
			time.Sleep(50 * time.Millisecond)
			reused := attributiontest.ReusePid(t, pid, other.SysProcAttr(t, 65534))
			if at, err := a[name].Attribute(p); !errors.Is(err, attribution.ErrPeerGone) || at.Session != "" {
				t.Errorf("Attribute() after pid %d exited (recycled: %v) = %+v, %v, want ErrPeerGone and no session", pid, reused, at, err)
			}
			t.Logf("pid %d recycled by a process of session s2: %v", pid, reused)
		})
	}
}
