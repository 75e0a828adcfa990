package dnsproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/sandtrail/sandtrail/dnsproxy/dnstest"
)

// countingListener counts and keeps the connections it accepts.
type countingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *countingListener) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// closeAll closes every accepted connection from the server's side, as an
// upstream that drops idle connections does.
func (l *countingListener) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}

// startTCPUpstream is startUpstream over TCP only, with its listener
// counting connections.
func startTCPUpstream(t *testing.T) (*dnstest.Server, *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	u := dnstest.New(ln.Addr().String(), zone)
	u.Serve(t, nil, cl)
	return u, cl
}

// TestUpstreamTCPReuse checks that TCP queries reuse one upstream
// connection, that a connection the upstream closed costs a fresh dial but
// no answer, and that idle connections expire.
func TestUpstreamTCPReuse(t *testing.T) {
	up, ln := startTCPUpstream(t)
	rec := newRecorder()
	p := newProxy(t, []string{up.Addr}, WithEmit(rec.emit))
	clk := &clock{t: t0}
	p.pool.now = clk.now
	v4, _, err := p.AddSession("s")
	if err != nil {
		t.Fatal(err)
	}
	ask := func(what string) {
		t.Helper()
		resp, _ := exchangeAt(t, v4, "tcp", query("a.example.", mdns.TypeA))
		if resp.Rcode != mdns.RcodeSuccess || len(resp.Answer) != 1 {
			t.Fatalf("%s: rcode %s answers %q, want NOERROR and one", what, rcodeString(resp.Rcode), rrStrings(resp.Answer))
		}
		rec.next(t)
	}
	for i := range 3 {
		ask("query " + string(rune('1'+i)))
	}
	if got := ln.accepted(); got != 1 {
		t.Errorf("upstream accepted %d connections for 3 queries, want 1", got)
	}
	if got := p.pool.size(up.Addr); got != 1 {
		t.Errorf("idle connections = %d, want 1", got)
	}

	// The upstream drops its connections: the next query fails on the
	// pooled one and is answered over a fresh one.
	ln.closeAll()
	ask("after the upstream closed")
	if got := ln.accepted(); got != 2 {
		t.Errorf("upstream accepted %d connections, want 2", got)
	}

	// An idle connection older than poolIdleTime is not reused.
	clk.advance(poolIdleTime + time.Second)
	ask("after the idle time")
	if got := ln.accepted(); got != 3 {
		t.Errorf("upstream accepted %d connections after the idle time, want 3", got)
	}
	if st := p.Stats(); st.UpstreamFailures != 0 || st.Queries != 5 {
		t.Errorf("Stats() = %+v, want 5 queries, no upstream failure", st)
	}

	// Close closes the idle connections.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := p.pool.size(up.Addr); got != 0 {
		t.Errorf("idle connections after Close = %d, want 0", got)
	}
}

func TestPoolBounded(t *testing.T) {
	pl := newTCPPool()
	var conns []*mdns.Conn
	for range poolIdle + 3 {
		a, b := net.Pipe()
		defer b.Close()
		c := &mdns.Conn{Conn: a}
		conns = append(conns, c)
		pl.put("u", c)
	}
	if got := pl.size("u"); got != poolIdle {
		t.Errorf("size = %d, want %d", got, poolIdle)
	}
	// The connections beyond the bound were closed.
	for _, c := range conns[poolIdle:] {
		if !pipeClosed(c) {
			t.Error("a connection beyond the bound is still open")
		}
	}
	if pipeClosed(conns[0]) {
		t.Error("a kept connection was closed")
	}
	// get returns the most recently put first.
	if got := pl.get("u"); got != conns[poolIdle-1] {
		t.Error("get did not return the most recently used connection")
	}
	pl.close()
	if got := pl.get("u"); got != nil {
		t.Error("get after close returned a connection")
	}
	a, b := net.Pipe()
	defer b.Close()
	c := &mdns.Conn{Conn: a}
	pl.put("u", c)
	if !pipeClosed(c) {
		t.Error("put after close kept the connection open")
	}
}

// pipeClosed reports whether c, one end of a net.Pipe whose other end
// never reads, was closed: a write then fails at once with ErrClosedPipe
// instead of timing out.
func pipeClosed(c *mdns.Conn) bool {
	_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Conn.Write([]byte{0})
	return errors.Is(err, io.ErrClosedPipe)
}
