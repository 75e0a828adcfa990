package dnsproxy

import (
	"sync"
	"time"

	mdns "github.com/miekg/dns"
)

// Bounds of the upstream TCP connection pool.
const (
	// poolIdle is how many idle TCP connections are kept per upstream.
	poolIdle = 16
	// poolIdleTime is how long an idle connection is kept. Resolvers close
	// idle TCP connections after some seconds (RFC 7766 suggests tens of
	// seconds); a connection the upstream closed anyway costs one failed
	// exchange and a fresh dial, never an answer.
	poolIdleTime = 5 * time.Second
)

// tcpPool keeps idle TCP connections to the upstreams, so that TCP queries
// do not pay a handshake each (RFC 7766 connection reuse). A connection is
// used by one exchange at a time and is put back only after an exchange
// that succeeded and whose deadline was not cut short.
type tcpPool struct {
	now func() time.Time

	mu     sync.Mutex
	idle   map[string][]idleConn // by upstream, most recently used last
	closed bool
}

type idleConn struct {
	c     *mdns.Conn
	since time.Time
}

func newTCPPool() *tcpPool {
	return &tcpPool{now: time.Now, idle: make(map[string][]idleConn)}
}

// get returns the most recently used idle connection to upstream, or nil.
// Connections idle for longer than poolIdleTime are closed.
func (t *tcpPool) get(upstream string) *mdns.Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	conns := t.idle[upstream]
	now := t.now()
	for len(conns) > 0 {
		ic := conns[len(conns)-1]
		conns = conns[:len(conns)-1]
		if now.Sub(ic.since) < poolIdleTime {
			t.idle[upstream] = conns
			return ic.c
		}
		// The rest are older still.
		for _, old := range append(conns, ic) {
			old.c.Close()
		}
		conns = nil
	}
	delete(t.idle, upstream)
	return nil
}

// put keeps c for reuse, or closes it when the pool is full or closed.
func (t *tcpPool) put(upstream string, c *mdns.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || len(t.idle[upstream]) >= poolIdle {
		c.Close()
		return
	}
	t.idle[upstream] = append(t.idle[upstream], idleConn{c: c, since: t.now()})
}

// size returns the number of idle connections to upstream.
func (t *tcpPool) size(upstream string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.idle[upstream])
}

// close closes the idle connections; connections put back later are
// closed at once.
func (t *tcpPool) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for u, conns := range t.idle {
		for _, ic := range conns {
			ic.c.Close()
		}
		delete(t.idle, u)
	}
}
