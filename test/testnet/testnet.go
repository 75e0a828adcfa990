// Package testnet is test support for the network tests of the collector
// and the end-to-end tests: a loopback HTTP server that counts the bytes
// of every connection it accepts (what the kernel's byte counts are
// checked against), the client that fetches from it, and a listener that
// accepts connections and drops them at once.
//
// It imports only the standard library. Servers run in the test process
// and are closed when the test ends.
package testnet

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Conn is the server side of a connection, counting the bytes it read and
// wrote.
type Conn struct {
	net.Conn
	read, written atomic.Int64
}

func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

func (c *Conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	return n, err
}

// BytesRead returns how many bytes the server read from the client so far.
func (c *Conn) BytesRead() int64 { return c.read.Load() }

// BytesWritten returns how many bytes the server wrote to the client so
// far.
func (c *Conn) BytesWritten() int64 { return c.written.Load() }

// Server is an HTTP server on a loopback address that answers /?n=N with N
// bytes and keeps each connection's counts by the client's port.
type Server struct {
	net.Listener
	srv   *http.Server
	mu    sync.Mutex
	conns map[uint16]*Conn
}

// StartServer starts a Server listening on network ("tcp4" or "tcp6") and
// addr ("127.0.0.1:0", "[::1]:0"). It fails the test if it cannot listen
// and is closed when the test ends.
func StartServer(t testing.TB, network, addr string) *Server {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Listener: ln, conns: map[uint16]*Conn{}}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, _ := strconv.Atoi(req.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(make([]byte, n))
	})}
	go s.srv.Serve(s)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// Accept accepts a connection and starts counting its bytes.
func (s *Server) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &Conn{Conn: c}
	s.mu.Lock()
	s.conns[uint16(c.RemoteAddr().(*net.TCPAddr).Port)] = cc
	s.mu.Unlock()
	return cc, nil
}

// Conn returns the server side of the connection from the client's port,
// or nil if the server accepted none from it.
func (s *Server) Conn(port uint16) *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[port]
}

// IP returns the address the server listens on.
func (s *Server) IP() net.IP { return s.Addr().(*net.TCPAddr).IP }

// Port returns the port the server listens on.
func (s *Server) Port() uint16 { return uint16(s.Addr().(*net.TCPAddr).Port) }

// URL returns the URL at which the server answers with n bytes.
func (s *Server) URL(n int) string { return fmt.Sprintf("http://%s/?n=%d", s.Addr(), n) }

// Get fetches url over a fresh connection (no keep-alive), reads the body
// to its end and returns its length.
func Get(url string) (int64, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 60 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(io.Discard, resp.Body)
}

// StartDropServer listens on network and addr and closes every connection
// it accepts at once. It fails the test if it cannot listen, and the
// listener is closed when the test ends.
func StartDropServer(t testing.TB, network, addr string) net.Listener {
	t.Helper()
	ln, _ := StartCountingServer(t, network, addr)
	return ln
}

// StartCountingServer is StartDropServer that also counts the connections
// it accepted.
func StartCountingServer(t testing.TB, network, addr string) (net.Listener, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return ln, &n
}

// Within5 reports whether got is within 5% of want: the margin the tests
// allow between a kernel byte count and what the server counted.
func Within5(got uint64, want int64) bool {
	d := float64(got) - float64(want)
	return d <= 0.05*float64(want) && -d <= 0.05*float64(want)
}
