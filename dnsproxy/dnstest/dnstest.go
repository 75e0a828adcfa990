// Package dnstest is test support for the DNS proxy's tests, the
// collector's DNS redirect test and the end-to-end tests: a real miekg/dns
// server on a loopback address (UDP and TCP on one port) that answers from
// fixed records and counts the queries it gets per name, to stand for an
// upstream resolver or for a session's proxy.
//
// A Server runs in the test process and stops when the test ends.
package dnstest

import (
	"net"
	"strings"
	"sync"
	"testing"

	mdns "github.com/miekg/dns"
)

// Zone maps a fully qualified lower-case name ("a.example.") to its
// records in zone-file form ("a.example. 300 IN A 192.0.2.1"). A name's
// records may be a CNAME chain: the CNAMEs are answered with every type.
type Zone map[string][]string

// Server answers from a Zone: a name not in it is NXDOMAIN; a known name
// gets its records of the query's type and its CNAMEs (NOERROR without
// answers if there are none); a message without exactly one question is
// FORMERR. Answers are authoritative.
type Server struct {
	// Addr is the address the server answers at, over UDP and TCP.
	Addr string

	zone   Zone
	mu     sync.Mutex
	counts map[string]int
}

// Start binds UDP and TCP on one free port of ip ("127.0.0.1", "::1") and
// serves zone there until the test ends.
func Start(t testing.TB, ip string, zone Zone) *Server {
	t.Helper()
	pc, ln := BindPair(t, ip)
	s := New(pc.LocalAddr().String(), zone)
	s.Serve(t, pc, ln)
	return s
}

// New returns a Server for zone that says it answers at addr; Serve starts
// it.
func New(addr string, zone Zone) *Server {
	return &Server{Addr: addr, zone: zone, counts: map[string]int{}}
}

// Serve serves s over UDP on pc and TCP on ln (either may be nil) until
// the test ends. It returns once both servers are started.
func (s *Server) Serve(t testing.TB, pc net.PacketConn, ln net.Listener) {
	t.Helper()
	var servers []*mdns.Server
	if pc != nil {
		servers = append(servers, &mdns.Server{PacketConn: pc, Handler: s})
	}
	if ln != nil {
		servers = append(servers, &mdns.Server{Listener: ln, Handler: s})
	}
	for _, srv := range servers {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ActivateAndServe()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
}

// ServeDNS answers req from the zone and counts it.
func (s *Server) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) {
	resp := new(mdns.Msg)
	resp.SetReply(req)
	resp.Authoritative = true
	if len(req.Question) != 1 {
		resp.Rcode = mdns.RcodeFormatError
		_ = w.WriteMsg(resp)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	s.mu.Lock()
	s.counts[name]++
	s.mu.Unlock()
	recs, ok := s.zone[name]
	if !ok {
		resp.Rcode = mdns.RcodeNameError
	}
	for _, rec := range recs {
		rr, err := mdns.NewRR(rec)
		if err != nil {
			panic(err)
		}
		if rr.Header().Rrtype == q.Qtype || rr.Header().Rrtype == mdns.TypeCNAME {
			resp.Answer = append(resp.Answer, rr)
		}
	}
	_ = w.WriteMsg(resp)
}

// Count returns how many queries for name (fully qualified, lower case)
// the server got.
func (s *Server) Count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[name]
}

// BindPair binds UDP and TCP on one free port of ip. Both are closed
// when the test ends.
func BindPair(t testing.TB, ip string) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 16 {
		pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			t.Cleanup(func() { pc.Close(); ln.Close() })
			return pc, ln
		}
		pc.Close()
	}
	t.Fatalf("no free port of %s for both udp and tcp", ip)
	return nil, nil
}
