package dnsproxy

import (
	"container/list"
	"net/netip"
	"sync"
	"time"

	mdns "github.com/miekg/dns"
)

// domainMap maps an address to the name it was last answered for, until the
// answer's TTL runs out. It holds at most max addresses and evicts the least
// recently answered first, so a flood of answers cannot grow it without
// bound.
type domainMap struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *domainEntry, most recently answered first
	byIP  map[netip.Addr]*list.Element
}

type domainEntry struct {
	ip      netip.Addr
	name    string
	expires time.Time
}

func newDomainMap(max int) *domainMap {
	return &domainMap{max: max, order: list.New(), byIP: make(map[netip.Addr]*list.Element)}
}

// put records that ip was answered for name until expires.
func (m *domainMap) put(ip netip.Addr, name string, expires time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.byIP[ip]; ok {
		e := el.Value.(*domainEntry)
		e.name, e.expires = name, expires
		m.order.MoveToFront(el)
		return
	}
	m.byIP[ip] = m.order.PushFront(&domainEntry{ip: ip, name: name, expires: expires})
	for m.order.Len() > m.max {
		m.remove(m.order.Back())
	}
}

// get returns the name for ip if its answer has not expired at now; an
// expired entry is removed.
func (m *domainMap) get(ip netip.Addr, now time.Time) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.byIP[ip]
	if !ok {
		return "", false
	}
	e := el.Value.(*domainEntry)
	if !now.Before(e.expires) {
		m.remove(el)
		return "", false
	}
	return e.name, true
}

// len returns the number of entries, expired or not.
func (m *domainMap) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.order.Len()
}

func (m *domainMap) remove(el *list.Element) {
	delete(m.byIP, el.Value.(*domainEntry).ip)
	m.order.Remove(el)
}

// learn puts the A and AAAA answers of resp into the IP→domain map under the
// name the client asked for, until their TTL runs out, and passes each to
// the answer hook.
func (p *Proxy) learn(name string, resp *mdns.Msg, now time.Time) {
	for _, rr := range resp.Answer {
		var a netip.Addr
		switch r := rr.(type) {
		case *mdns.A:
			a, _ = netip.AddrFromSlice(r.A.To4())
		case *mdns.AAAA:
			a, _ = netip.AddrFromSlice(r.AAAA.To16())
		default:
			continue
		}
		if !a.IsValid() {
			continue
		}
		a = a.Unmap()
		ttl := time.Duration(rr.Header().Ttl) * time.Second
		p.domains.put(a, name, now.Add(max(ttl, MinDomainTTL)))
		p.answerHook(name, a, ttl)
	}
}

// DomainOf returns the name that most recently resolved to ip, while that
// answer's TTL has not run out.
func (p *Proxy) DomainOf(ip netip.Addr) (string, bool) {
	return p.domains.get(ip.Unmap(), p.now())
}
