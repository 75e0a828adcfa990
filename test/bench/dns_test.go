package bench

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/sandtrail/sandtrail/dnsproxy"
	"github.com/sandtrail/sandtrail/kernel/cgroup"
	"github.com/sandtrail/sandtrail/record/event"
)

// dnsZoneHandler answers every A query with one fixed record, as a local
// resolver with a warm cache would.
func dnsZoneHandler(w mdns.ResponseWriter, req *mdns.Msg) {
	resp := new(mdns.Msg)
	resp.SetReply(req)
	resp.Answer = append(resp.Answer, &mdns.A{
		Hdr: mdns.RR_Header{Name: req.Question[0].Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 300},
		A:   net.IPv4(192, 0, 2, 1),
	})
	_ = w.WriteMsg(resp)
}

// dnsUpstream starts a miekg/dns server on one loopback port for UDP and TCP.
func dnsUpstream(b *testing.B) string {
	b.Helper()
	for range 16 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err != nil {
			pc.Close()
			continue
		}
		for _, s := range []*mdns.Server{{PacketConn: pc}, {Listener: ln}} {
			s.Handler = mdns.HandlerFunc(dnsZoneHandler)
			started := make(chan struct{})
			s.NotifyStartedFunc = func() { close(started) }
			go s.ActivateAndServe()
			<-started
			b.Cleanup(func() { s.Shutdown() })
		}
		return pc.LocalAddr().String()
	}
	b.Fatal("no free port for both udp and tcp")
	return ""
}

// ownCgroupID is the id of this process's cgroup v2.
func ownCgroupID() (uint64, error) {
	dir, err := cgroup.OwnDir()
	if err != nil {
		return 0, err
	}
	return cgroup.ID(dir)
}

// dnsExchange sends b.N queries for a.example to addr, over one connection
// per 100 queries (miekg/dns servers close a TCP connection after 128).
func dnsExchange(b *testing.B, proto, addr string) {
	c := &mdns.Client{Net: proto, Timeout: time.Minute}
	var conn *mdns.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	m := new(mdns.Msg)
	m.SetQuestion("a.example.", mdns.TypeA)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%100 == 0 {
			if conn != nil {
				conn.Close()
			}
			var err error
			if conn, err = c.Dial(addr); err != nil {
				b.Fatal(err)
			}
		}
		r, _, err := c.ExchangeWithConn(m, conn)
		if err != nil {
			b.Fatal(err)
		}
		if len(r.Answer) != 1 {
			b.Fatalf("answers = %v, want one", r.Answer)
		}
	}
}

// BenchmarkDNSProxy measures one query and answer through dnsproxy's
// proxy (forward to the upstream, IP→domain map, one net.dns event to a
// non-blocking emit) against the same query sent straight to the upstream in
// the same run, over UDP and over one TCP connection. x-direct is the ratio.
func BenchmarkDNSProxy(b *testing.B) {
	up := dnsUpstream(b)
	events := make(chan *event.Event, 1024)
	p, err := dnsproxy.New([]string{up}, dnsproxy.WithEmit(func(e *event.Event) {
		select {
		case events <- e:
		default:
		}
	}))
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Listen("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(context.Background()) }()
	b.Cleanup(func() {
		p.Close()
		<-done
	})
	// Drain events as a journal queue would.
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-events:
			case <-stop:
				return
			}
		}
	}()
	b.Cleanup(func() { close(stop) })

	// A session's own listener that checks the sender's cgroup for every
	// query (sock_diag), as the daemon's are.
	var checked netip.AddrPort
	if own, err := ownCgroupID(); err != nil {
		b.Logf("no sender check measured: %v", err)
	} else if err := dnsproxy.CheckSocketLookup(); err != nil {
		b.Logf("no sender check measured: %v", err)
	} else if checked, _, err = p.AddSession("bench", dnsproxy.WithCgroup(own)); err != nil {
		b.Fatal(err)
	}

	for _, proto := range []string{"udp", "tcp"} {
		var base float64
		b.Run(proto+"/direct-baseline", func(b *testing.B) {
			dnsExchange(b, proto, up)
			base = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		b.Run(proto+"/proxy", func(b *testing.B) {
			dnsExchange(b, proto, p.Addr().String())
			if base > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/base, "x-direct")
			}
		})
		if checked.IsValid() {
			b.Run(proto+"/proxy-sender-checked", func(b *testing.B) {
				dnsExchange(b, proto, checked.String())
				if base > 0 {
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/base, "x-direct")
				}
			})
		}
	}
}
