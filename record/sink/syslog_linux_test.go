package sink

import (
	"context"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSyslogSinkStalledReceiver: a receiver that takes the connection and
// never reads stops acknowledging once its small receive buffer is full;
// Write gives up after Timeout without progress, with an error, rather
// than block the Runner, and the next Write reconnects.
func TestSyslogSinkStalledReceiver(t *testing.T) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		rc.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
		return err
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never read
		}
	}()
	defer func() {
		ln.Close()
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	}()
	for _, tc := range []struct {
		name    string
		entries int
	}{
		{"acknowledgements stop", 1}, // the batch fits the socket's buffer
		{"writes block", 64},         // 4 MB: it does not
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSyslog(SyslogConfig{Address: ln.Addr().String(), Host: "h", Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var batch []Entry
			for i := range tc.entries {
				batch = append(batch, Entry{Seq: uint64(i), Kind: "process.exec", Line: []byte(`{"pad":"` + strings.Repeat("x", 60<<10) + `"}`)})
			}
			began := time.Now()
			err = s.Write(context.Background(), batch)
			if err == nil {
				t.Fatal("Write to a receiver that never reads = nil error")
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Errorf("Write took %s to give up, want about its Timeout (300ms) of no progress", took)
			}
			t.Logf("Write: %v", err)
			if s.conn != nil {
				t.Error("the stalled connection is kept, want it closed for the next Write to reconnect")
			}
		})
	}
}
