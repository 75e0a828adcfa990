package dnsproxy

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/sandtrail/sandtrail/record/event"
)

// validatingEmit checks every event and keeps the first invalid one's error.
type validatingEmit struct {
	mu  sync.Mutex
	err error
	n   atomic.Uint64
}

func (v *validatingEmit) emit(e *event.Event) {
	v.n.Add(1)
	err := e.Validate()
	if err == nil {
		_, err = event.Marshal(e)
	}
	if err != nil {
		v.mu.Lock()
		if v.err == nil {
			v.err = err
		}
		v.mu.Unlock()
	}
}

func (v *validatingEmit) check(t *testing.T) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		t.Fatalf("emitted an invalid event: %v", v.err)
	}
}

// FuzzServe sends arbitrary bytes to a running proxy as a client's UDP
// datagram and as a TCP message; the proxy must keep answering, and every
// event it emits must be valid.
func FuzzServe(f *testing.F) {
	up := startUpstream(f)
	v := &validatingEmit{}
	p := startProxy(f, []string{up.Addr}, WithEmit(v.emit),
		WithPolicy(func(name string) (bool, string) { return name == "evil.example", "test" }))
	addr := p.Addr().String()
	f.Fuzz(func(t *testing.T, data []byte) {
		uc, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer uc.Close()
		if _, err := uc.Write(data); err != nil {
			t.Fatal(err)
		}
		tc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		msg := binary.BigEndian.AppendUint16(nil, uint16(min(len(data), 0xffff)))
		if _, err := tc.Write(append(msg, data[:min(len(data), 0xffff)]...)); err != nil {
			t.Fatal(err)
		}
		c := &mdns.Client{Net: "udp", Timeout: 30 * time.Second}
		m := new(mdns.Msg)
		m.SetQuestion("a.example.", mdns.TypeA)
		r, _, err := c.Exchange(m, addr)
		if err != nil {
			t.Fatalf("proxy stopped answering: %v", err)
		}
		if len(r.Answer) != 1 {
			t.Fatalf("answers = %v, want one", r.Answer)
		}
		v.check(t)
	})
}

// fuzzUpstream answers every UDP query with the bytes in answer, after
// setting their message id to the query's.
type fuzzUpstream struct {
	pc     net.PacketConn
	answer atomic.Pointer[[]byte]
}

func (u *fuzzUpstream) serve() {
	buf := make([]byte, 65535)
	for {
		n, from, err := u.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if n < 2 {
			continue
		}
		a := append([]byte(nil), *u.answer.Load()...)
		if len(a) >= 2 {
			copy(a, buf[:2])
		}
		_, _ = u.pc.WriteTo(a, from)
	}
}

// FuzzUpstreamAnswer makes the upstream answer with arbitrary bytes: the
// proxy must answer the client (with the parsed answer or SERVFAIL) and emit
// one valid event per query.
func FuzzUpstreamAnswer(f *testing.F) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	u := &fuzzUpstream{pc: pc}
	empty := []byte{}
	u.answer.Store(&empty)
	go u.serve()
	f.Cleanup(func() { pc.Close() })
	v := &validatingEmit{}
	p := startProxy(f, []string{pc.LocalAddr().String()}, WithEmit(v.emit), WithTimeout(200*time.Millisecond))
	f.Fuzz(func(t *testing.T, data []byte) {
		u.answer.Store(&data)
		c := &mdns.Client{Net: "udp", Timeout: 30 * time.Second}
		m := new(mdns.Msg)
		m.SetQuestion("a.example.", mdns.TypeA)
		before := p.Stats().Queries
		if _, _, err := c.Exchange(m, p.Addr().String()); err != nil {
			// The proxy passes the upstream answer on as miekg/dns parsed
			// and packed it; a record that packs bigger than the client's
			// 512 bytes is truncated by the server, which the client
			// reports as an error. Only a hang is a failure here.
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("proxy did not answer: %v", err)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for p.Stats().Queries == before {
			if time.Now().After(deadline) {
				t.Fatal("query not counted")
			}
			time.Sleep(time.Millisecond)
		}
		v.check(t)
		// Every A or AAAA the proxy learned maps back to the query name.
		for _, ip := range []string{"192.0.2.1", "192.0.2.7", "2001:db8::7"} {
			if d, ok := p.DomainOf(mustAddr(ip)); ok && d != "a.example" {
				t.Fatalf("DomainOf(%s) = %q, want a.example", ip, d)
			}
		}
	})
}
