package dnsproxy

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/sandtrail/sandtrail/record/event"
)

// toEvent is the one conversion of a query and its answer to an event.
func (p *Proxy) toEvent(ts time.Time, sessionID, proto string, src, dst netip.AddrPort, verdict, reason string, q mdns.Question, resp *mdns.Msg) *event.Event {
	d := &event.DNS{
		Query: queryName(q.Name),
		QType: typeString(q.Qtype),
		RCode: rcodeString(resp.Rcode),
	}
	for _, rr := range resp.Answer {
		h := rr.Header()
		d.Answers = append(d.Answers, event.DNSAnswer{Type: typeString(h.Rrtype), Data: rrData(rr), TTL: h.Ttl})
	}
	n := &event.Net{
		Op:      "dns",
		Proto:   proto,
		Verdict: verdict,
		Reason:  reason,
		DNS:     d,
	}
	if src.IsValid() {
		n.SrcIP, n.SrcPort = src.Addr().String(), src.Port()
	}
	if dst.IsValid() {
		n.DstIP, n.DstPort = dst.Addr().String(), dst.Port()
	}
	return &event.Event{
		V:         event.SchemaVersion,
		TS:        ts,
		SessionID: sessionID,
		Host:      p.host,
		Kind:      event.KindNetDNS,
		Source:    event.SourceKernel,
		Net:       n,
	}
}

func typeString(t uint16) string {
	if s, ok := mdns.TypeToString[t]; ok {
		return s
	}
	return "TYPE" + strconv.Itoa(int(t))
}

func rcodeString(r int) string {
	if s, ok := mdns.RcodeToString[r]; ok {
		return s
	}
	return "RCODE" + strconv.Itoa(r)
}

// rrData is the record's data in presentation format; names are lower case
// without the trailing dot, like the query.
func rrData(rr mdns.RR) string {
	switch r := rr.(type) {
	case *mdns.A:
		return r.A.String()
	case *mdns.AAAA:
		return r.AAAA.String()
	case *mdns.CNAME:
		return queryName(r.Target)
	case *mdns.NS:
		return queryName(r.Ns)
	case *mdns.PTR:
		return queryName(r.Ptr)
	case *mdns.DNAME:
		return queryName(r.Target)
	}
	return strings.TrimSpace(strings.TrimPrefix(rr.String(), rr.Header().String()))
}
