package server

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/kernel/attribution/attributiontest"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/ingest"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
)

// syncBuffer is a log output the server may write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestConnCaps runs real processes, as nobody and as root, in and out of
// session cgroups, holding connections: each peer (a session, whatever its
// processes and cgroups, or a uid outside sessions) gets its cap, all but
// root outside sessions share the global cap minus root's reserve, and
// every close path gives the slot back.
func TestConnCaps(t *testing.T) {
	base := cgrouptest.New(t)
	cgS := base.Child(t, "S")
	cgS2 := cgS.Child(t, "nested")
	cgT := base.Child(t, "T")
	cgOut := base.Child(t, "outside")
	table := NewTable()
	table.Register(cgS.ID, "sess-S")
	table.Register(cgT.ID, "sess-T")
	j, _ := journaltest.Open(t)
	var logs syncBuffer
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: &logs})
	// 16 connections, 2 reserved for root outside sessions, 4 per peer.
	srv := New(j, table, WithMaxConns(16), WithMaxConnsPerPeer(4), WithLogger(log))
	sock := startServer(t, srv)
	exe := attributiontest.PublicBinary(t)
	hold := func(cg *cgrouptest.Cgroup, uid int) *child {
		return startRole(t, exe, "hold", sock, cg.SysProcAttr(t, uid))
	}
	open := func(t *testing.T, h *child, n int, want string) {
		t.Helper()
		if got := h.do(t, fmt.Sprintf("open %d", n)); got != want {
			t.Fatalf("open %d = %q, want %q", n, got, want)
		}
	}

	s1, s2 := hold(cgS, nobody), hold(cgS2, nobody)
	t.Run("one session is one peer across processes, cgroups and uids", func(t *testing.T) {
		open(t, s1, 3, "admitted=3 busy=0")
		open(t, s2, 3, "admitted=1 busy=2")
		// An agent running as root in its session is the session.
		open(t, hold(cgS, -1), 2, "admitted=0 busy=2")
		if st := srv.Stats(); st.PeerBusy != 4 || st.Busy != 4 {
			t.Errorf("Stats() Busy, PeerBusy = %d, %d, want 4, 4", st.Busy, st.PeerBusy)
		}
		if l := logs.String(); strings.Count(l, "peer holds its cap") != 1 || !strings.Contains(l, "peer=\"session sess-S\"") {
			t.Errorf("log = %q, want one line naming session sess-S at its cap", l)
		}
	})
	t.Run("other peers have caps of their own, and share all but root's reserve", func(t *testing.T) {
		open(t, hold(cgT, nobody), 5, "admitted=4 busy=1")
		open(t, hold(cgOut, nobody), 5, "admitted=4 busy=1")
		// 12 of the 14 shared connections are held.
		open(t, hold(cgOut, 65533), 4, "admitted=2 busy=2")
	})
	t.Run("root outside sessions has its reserve", func(t *testing.T) {
		var conns []net.Conn
		for range 3 {
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			code, err := ping(c)
			if err != nil {
				t.Fatal(err)
			}
			if len(conns) < 2 && code != ingest.CodeMalformed || len(conns) == 2 && code != ingest.CodeBusy {
				t.Fatalf("root's connection %d: reply code %q, want malformed (admitted) for 2, then busy", len(conns), code)
			}
			conns = append(conns, c)
		}
		rep := roundTrip(t, sock, request(toolEvent("s", "root-at-cap")))
		if rep.Code != ingest.CodeBusy {
			t.Fatalf("root's connection over the global cap: %+v, want busy", rep)
		}
		conns[0].Close()
		waitCaps(t, srv, 15)
		if rep := roundTrip(t, sock, request(toolEvent("s", "root-in-reserve"))); rep.Code != "" {
			t.Fatalf("root's connection after one closed: %+v, want served", rep)
		}
	})
	t.Run("closing and churning give every slot back", func(t *testing.T) {
		for _, h := range []*child{s1, s2} {
			if got := h.do(t, "close"); got != "done" {
				t.Fatalf("close = %q", got)
			}
		}
		if got := s1.do(t, "churn 200"); got != "done" {
			t.Fatalf("churn = %q", got)
		}
		// 15 held before, sess-S held 4, root's roundTrip closed.
		waitCaps(t, srv, 10)
		open(t, s2, 5, "admitted=4 busy=1")
	})
}

// waitCaps waits until the server counts want admitted connections: it
// notices closes asynchronously.
func waitCaps(t *testing.T, srv *Server, want int) {
	t.Helper()
	for i := 0; ; i++ {
		srv.caps.mu.Lock()
		got, shared := srv.caps.total, srv.caps.shared
		sum := 0
		for _, n := range srv.caps.byPeer {
			sum += n
		}
		srv.caps.mu.Unlock()
		if sum != shared {
			t.Fatalf("per-peer counts sum to %d, shared count is %d", sum, shared)
		}
		if got == want {
			return
		}
		if i > 1000 {
			t.Fatalf("admitted connections = %d, want %d", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
