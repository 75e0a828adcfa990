//go:build 386 || amd64 || arm64

package collector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/kernel/cgroup"
	"github.com/sandtrail/sandtrail/policies/egress"
	"github.com/sandtrail/sandtrail/record/event"
)

// netCollector is the network part (bpf/net.c): the cgroup socket hooks
// that record and enforce connects and sends and redirect DNS, and the TCP
// state tracepoint that records listen, accept and close with bytes.
type netCollector struct {
	objs   netObjects
	loaded bool
	egress EgressPolicy
	lookup func(netip.Addr) string

	mu sync.Mutex
	// learned holds, per address (16-byte form), the domains the DNS proxy
	// answered with it and when each expires.
	learned map[netip.Addr]map[string]learnedDomain
	// redirects are the watched cgroups with a DNS redirect.
	redirects map[uint64]bool

	stop, done chan struct{}
}

type learnedDomain struct {
	class   uint8
	expires time.Time
	at      time.Time
}

// netConnsMax, when set, replaces the size of the connection table (tests
// fill it).
var netConnsMax uint32

// Bounds of the learned domains: addresses (the size of the kernel's
// domains map) and live domains per address.
const (
	maxLearnedAddrs   = 65536
	maxDomainsPerAddr = 64
)

// errLearnedFull is returned by LearnDomain when maxLearnedAddrs addresses
// are known.
var errLearnedFull = errors.New("collector: learned-domain table full")

// netSweepInterval is how often expired learned domains are removed.
const netSweepInterval = time.Second

func (n *netCollector) load(c *Collector, shared *ebpf.CollectionOptions) error {
	spec, err := loadNet()
	if err != nil {
		return fmt.Errorf("loading net bpf spec: %w", err)
	}
	if netConnsMax > 0 {
		spec.Maps["conns"].MaxEntries = netConnsMax
	}
	// The shared maps were sized by the loader (the ring buffer).
	for name, m := range shared.MapReplacements {
		if ms, ok := spec.Maps[name]; ok {
			ms.MaxEntries = m.MaxEntries()
		}
	}
	if err := spec.LoadAndAssign(&n.objs, shared); err != nil {
		c.verifierError(err)
		return fmt.Errorf("loading net bpf objects: %w", err)
	}
	n.loaded = true
	n.egress = c.opts.egress
	n.lookup = c.opts.domainLookup
	n.learned = make(map[netip.Addr]map[string]learnedDomain)
	n.redirects = make(map[uint64]bool)
	if err := n.writeEgress(); err != nil {
		return err
	}
	c.dec.net = n
	return nil
}

// cgroupAttach is the v2 cgroup the socket hooks attach to: the collector's
// own (session cgroups are made beneath it), or the root in host-wide mode.
func cgroupAttach(hostWide bool) (string, error) {
	if hostWide {
		m, err := cgroup.ReadV2()
		if err != nil {
			return "", fmt.Errorf("%w: finding the cgroup v2 hierarchy for the socket hooks: %v", ErrNotSupported, err)
		}
		return m.Point, nil
	}
	dir, err := cgroup.OwnDir()
	if err != nil {
		return "", fmt.Errorf("%w: finding the collector's own v2 cgroup: %v", ErrNotSupported, err)
	}
	return dir, nil
}

// cgroupHook is a socket program the collector attaches to its cgroup
// (cgroupAttach). A hook with optional set is one whose failure leaves a
// capability off rather than the collector unstarted: optional is called
// with the error.
type cgroupHook struct {
	prog     *ebpf.Program
	typ      ebpf.AttachType
	optional func(error)
}

// attachCgroupHooks attaches each hook to the cgroup that cgroupAttach
// names.
func (c *Collector) attachCgroupHooks(hooks ...cgroupHook) error {
	dir, err := cgroupAttach(c.opts.hostWide)
	if err != nil {
		return err
	}
	for _, h := range hooks {
		l, err := link.AttachCgroup(link.CgroupOptions{Path: dir, Attach: h.typ, Program: h.prog})
		if err != nil {
			if h.optional != nil {
				h.optional(fmt.Errorf("attaching %s: %v", h.typ, err))
				continue
			}
			return fmt.Errorf("%w: attaching %s to cgroup %s: %v", ErrNotSupported, h.typ, dir, err)
		}
		c.links = append(c.links, l)
	}
	return nil
}

func (n *netCollector) attach(c *Collector) error {
	// getpeername of a redirected connected socket names the proxy
	// without these; nothing else depends on them.
	noGetpeername := func(err error) {
		c.log.Warn("socket hook not attached", "error", err)
		set(c.kernel, event.CapGetpeername, false, err.Error())
	}
	err := c.attachCgroupHooks(
		cgroupHook{prog: n.objs.NetConnect4, typ: ebpf.AttachCGroupInet4Connect},
		cgroupHook{prog: n.objs.NetConnect6, typ: ebpf.AttachCGroupInet6Connect},
		cgroupHook{prog: n.objs.NetSendmsg4, typ: ebpf.AttachCGroupUDP4Sendmsg},
		cgroupHook{prog: n.objs.NetSendmsg6, typ: ebpf.AttachCGroupUDP6Sendmsg},
		cgroupHook{prog: n.objs.NetRecvmsg4, typ: ebpf.AttachCGroupUDP4Recvmsg},
		cgroupHook{prog: n.objs.NetRecvmsg6, typ: ebpf.AttachCGroupUDP6Recvmsg},
		// A UDP socket's bytes at its release.
		cgroupHook{prog: n.objs.NetSockRelease, typ: ebpf.AttachCgroupInetSockRelease},
		// Socket creation.
		cgroupHook{prog: n.objs.NetSockCreate, typ: ebpf.AttachCGroupInetSockCreate},
		cgroupHook{prog: n.objs.NetGetpeername4, typ: ebpf.AttachCgroupInet4GetPeername, optional: noGetpeername},
		cgroupHook{prog: n.objs.NetGetpeername6, typ: ebpf.AttachCgroupInet6GetPeername, optional: noGetpeername},
	)
	if err != nil {
		return err
	}
	l, err := link.AttachTracing(link.TracingOptions{Program: n.objs.NetSockState})
	if err != nil {
		return fmt.Errorf("%w: attaching tp_btf program inet_sock_set_state: %v", ErrNotSupported, err)
	}
	c.links = append(c.links, l)
	l, err = link.Tracepoint("syscalls", "sys_exit_socket", n.objs.NetSocketExit, nil)
	if err != nil {
		return fmt.Errorf("%w: attaching tracepoint syscalls/sys_exit_socket: %v", ErrNotSupported, err)
	}
	c.links = append(c.links, l)
	n.stop, n.done = make(chan struct{}), make(chan struct{})
	go n.sweep()
	return nil
}

func (n *netCollector) programs() []progKind {
	if !n.loaded {
		return nil
	}
	return []progKind{
		{n.objs.NetConnect4, processEventKindKIND_NET_CONNECT},
		{n.objs.NetConnect6, processEventKindKIND_NET_CONNECT},
		{n.objs.NetSendmsg4, processEventKindKIND_NET_CONNECT},
		{n.objs.NetSendmsg6, processEventKindKIND_NET_CONNECT},
		{n.objs.NetSocketExit, processEventKindKIND_NET_SOCKET},
		{n.objs.NetSockRelease, processEventKindKIND_NET_CLOSE},
		// The state tracepoint loses listen, accept and close records;
		// it is accounted as net.close, the most frequent.
		{n.objs.NetSockState, processEventKindKIND_NET_CLOSE},
	}
}

func (n *netCollector) close() {
	if n.stop != nil {
		close(n.stop)
		<-n.done
		n.stop = nil
	}
	n.objs.Close()
	n.loaded = false
}

// counters names net_drops: failed inserts into the connection and
// listener tables, whose net.close (or net.accept) records are lost.
func (n *netCollector) counters() []*lossCounter {
	if !n.loaded {
		return nil
	}
	return []*lossCounter{{m: n.objs.NetDrops, kind: netDropsKind, source: LossSourceTable}}
}

// verdictCode maps a policy verdict to enum net_verdict.
func verdictCode(v egress.Verdict) uint8 {
	switch v {
	case egress.Block:
		return uint8(netNetVerdictNET_BLOCK)
	case egress.Flag:
		return uint8(netNetVerdictNET_FLAG)
	}
	return uint8(netNetVerdictNET_ALLOW)
}

// writeEgress compiles the egress policy into the BPF maps: the CIDR tries,
// the port table and the settings.
func (n *netCollector) writeEgress() error {
	zero := uint32(0)
	if n.egress == nil {
		return n.objs.EgressConf.Put(zero, netEgressConfig{})
	}
	t := n.egress.EgressTable()
	if err := n.writeCIDRs(cidrFlags(t)); err != nil {
		return err
	}
	if err := n.writePorts(portFlags(t)); err != nil {
		return err
	}
	if err := n.objs.EgressConf.Put(zero, egressConfig(t)); err != nil {
		return fmt.Errorf("writing egress settings: %w", err)
	}
	return nil
}

// cidrEntry is a prefix of the CIDR tries with its enum cidr_flags.
type cidrEntry struct {
	p     netip.Prefix
	flags uint8
}

// cidrFlags returns the prefixes of t with their flags, each prefix
// carrying as well the blocked and allowed flags of every prefix that
// contains it, so that the longest match answers for all. The prefixes
// 0.0.0.0/8 and ::/128 are always there, so that addresses counted as
// loopback (egress.Loopback) match an entry of loopbackFlags'.
func cidrFlags(t egress.Table) []cidrEntry {
	var entries []cidrEntry
	add := func(p netip.Prefix, f uint8) {
		for i := range entries {
			if entries[i].p == p {
				entries[i].flags |= f
				return
			}
		}
		entries = append(entries, cidrEntry{p, f})
	}
	for _, p := range t.BlockedCIDRs {
		add(p, uint8(netCidrFlagsCIDR_BLOCKED))
	}
	for _, p := range t.AllowedCIDRs {
		add(p, uint8(netCidrFlagsCIDR_ALLOWED))
	}
	for _, a := range t.DoHAddrs {
		add(netip.PrefixFrom(a, a.BitLen()), uint8(netCidrFlagsCIDR_DOH))
	}
	add(netip.MustParsePrefix("0.0.0.0/8"), 0)
	add(netip.MustParsePrefix("::/128"), 0)
	const inherited = uint8(netCidrFlagsCIDR_BLOCKED | netCidrFlagsCIDR_ALLOWED)
	out := make([]cidrEntry, len(entries))
	for i, e := range entries {
		for _, o := range entries {
			if o.p.Bits() < e.p.Bits() && o.p.Contains(e.p.Addr()) {
				e.flags |= o.flags & inherited
			}
		}
		out[i] = e
	}
	return loopbackFlags(out)
}

// loopbackFlags combines the flags of each entry within 0.0.0.0/8 or ::/128
// with those of its loopback address (egress.Loopback), as egress.Table
// decides: blocked or DoH when either is, allowed when both are. entries
// carry their inherited flags.
func loopbackFlags(entries []cidrEntry) []cidrEntry {
	const (
		either = uint8(netCidrFlagsCIDR_BLOCKED | netCidrFlagsCIDR_DOH)
		both   = uint8(netCidrFlagsCIDR_ALLOWED)
	)
	// lookup is the trie's longest match; a loopback address is outside
	// the entries this changes, so the order does not matter.
	lookup := func(a netip.Addr) uint8 {
		best, f := -1, uint8(0)
		for _, e := range entries {
			if e.p.Contains(a) && e.p.Bits() > best {
				best, f = e.p.Bits(), e.flags
			}
		}
		return f
	}
	for i, e := range entries {
		lo, ok := egress.Loopback(e.p.Addr())
		within := 128 // bits of ::/128, or of 0.0.0.0/8
		if lo.Is4() {
			within = 8
		}
		if !ok || e.p.Bits() < within {
			continue
		}
		l := lookup(lo)
		entries[i].flags = (e.flags|l)&either | e.flags&l&both
	}
	return entries
}

// writeCIDRs puts entries in the IPv4 and IPv6 tries.
func (n *netCollector) writeCIDRs(entries []cidrEntry) error {
	for _, e := range entries {
		var err error
		if e.p.Addr().Is4() {
			err = n.objs.Cidr4.Put(netCidr4Key{Prefixlen: uint32(e.p.Bits()), Addr: be32(e.p.Addr().As4())}, e.flags)
		} else {
			err = n.objs.Cidr6.Put(netCidr6Key{Prefixlen: uint32(e.p.Bits()), Addr: addrWords(e.p.Addr())}, e.flags)
		}
		if err != nil {
			return fmt.Errorf("writing egress prefix %s: %w", e.p, err)
		}
	}
	return nil
}

// portFlags returns the port table of t: every port, and its enum
// port_flags.
func portFlags(t egress.Table) (keys []uint32, vals []uint8) {
	keys = make([]uint32, 65536)
	vals = make([]uint8, 65536)
	for port := range 65536 {
		keys[port] = uint32(port)
		var f uint8
		for _, r := range t.BlockedPorts {
			if r.Match(uint16(port), "tcp") {
				f |= uint8(netPortFlagsPORT_BLOCKED_TCP)
			}
			if r.Match(uint16(port), "udp") {
				f |= uint8(netPortFlagsPORT_BLOCKED_UDP)
			}
		}
		for _, r := range t.AllowedPorts {
			if r.Match(uint16(port), "tcp") {
				f |= uint8(netPortFlagsPORT_ALLOWED_TCP)
			}
			if r.Match(uint16(port), "udp") {
				f |= uint8(netPortFlagsPORT_ALLOWED_UDP)
			}
		}
		vals[port] = f
	}
	return keys, vals
}

// writePorts writes the port table in one batch, or else port by port
// (skipping the zero values the table starts with).
func (n *netCollector) writePorts(keys []uint32, vals []uint8) error {
	if _, err := n.objs.Ports.BatchUpdate(keys, vals, nil); err == nil {
		return nil
	}
	for i := range keys {
		if vals[i] == 0 {
			continue
		}
		if err := n.objs.Ports.Put(keys[i], vals[i]); err != nil {
			return fmt.Errorf("writing egress port %d: %w", keys[i], err)
		}
	}
	return nil
}

// egressConfig returns the settings of t.
func egressConfig(t egress.Table) netEgressConfig {
	cf := netEgressConfig{
		Enabled:   1,
		Def:       verdictCode(t.Default),
		DohAction: verdictCode(t.DoHAction),
	}
	if t.AllowedDests {
		cf.AllowedDests = 1
	}
	if len(t.AllowedPorts) > 0 {
		cf.AllowedPorts = 1
	}
	if t.UnixDefault != "" {
		cf.UnixDef = verdictCode(t.UnixDefault)
	}
	if t.RawSockets == egress.Block {
		cf.RawBlock = 1
	}
	return cf
}

// be32 returns the network-order bytes of a as the uint32 the kernel stores.
func be32(a [4]byte) uint32 { return binary.NativeEndian.Uint32(a[:]) }

// addrWords returns the 16-byte form of a (IPv4 as v4-mapped) as four
// network-order words.
func addrWords(a netip.Addr) [4]uint32 {
	b := a.As16()
	var w [4]uint32
	copy(asBytes(&w), b[:])
	return w
}

// wordsAddr is the inverse of addrWords for a struct net_addr.
func wordsAddr(r *netNetAddr) netip.Addr {
	b := asBytes(&r.Addr)
	switch r.Family {
	case unix.AF_INET:
		return netip.AddrFrom4([4]byte(b[:4]))
	case unix.AF_INET6:
		return netip.AddrFrom16([16]byte(b))
	}
	return netip.Addr{}
}

// domainClass maps an egress.DomainClass to enum domain_class.
func domainClass(dc egress.DomainClass) uint8 {
	var f uint8
	if dc.Blocked {
		f |= uint8(netDomainClassDOMAIN_BLOCKED)
	}
	if dc.DoH {
		f |= uint8(netDomainClassDOMAIN_DOH)
	}
	if dc.Allowed {
		f |= uint8(netDomainClassDOMAIN_ALLOWED)
	}
	return f
}

// learn records that ip was answered for domain until ttl from now, and
// writes the union of the classes of the domains the address currently
// stands for into the kernel's table (so that an address shared by an
// allowed and a blocked domain is blocked).
func (n *netCollector) learn(ip netip.Addr, domain string, ttl time.Duration) error {
	ip = ip.Unmap()
	var class uint8
	if n.egress != nil {
		class = domainClass(n.egress.EgressDomain(domain))
	}
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	m := n.learned[ip]
	if m == nil {
		if len(n.learned) >= maxLearnedAddrs {
			return fmt.Errorf("learning domain %q for %s: %w", domain, ip, errLearnedFull)
		}
		m = make(map[string]learnedDomain)
		n.learned[ip] = m
	}
	if _, ok := m[domain]; !ok && len(m) >= maxDomainsPerAddr {
		// Forget the domain that expires first.
		var first string
		for d, l := range m {
			if first == "" || l.expires.Before(m[first].expires) {
				first = d
			}
		}
		delete(m, first)
	}
	m[domain] = learnedDomain{class: class, expires: now.Add(ttl), at: now}
	return n.writeDomain(ip, now)
}

// writeDomain updates the kernel entry of ip from n.learned; n.mu is held.
func (n *netCollector) writeDomain(ip netip.Addr, now time.Time) error {
	var class uint8
	m := n.learned[ip]
	for d, l := range m {
		if now.After(l.expires) {
			delete(m, d)
			continue
		}
		class |= l.class
	}
	key := addrWords(ip)
	if len(m) == 0 {
		delete(n.learned, ip)
		if err := n.objs.Domains.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("forgetting domain class of %s: %w", ip, err)
		}
		return nil
	}
	if err := n.objs.Domains.Put(key, class); err != nil {
		return fmt.Errorf("writing domain class of %s: %w", ip, err)
	}
	return nil
}

// domain names ip for an event: the daemon's lookup, or else the domain most
// recently learned for it.
func (n *netCollector) domain(ip netip.Addr) string {
	if !ip.IsValid() {
		return ""
	}
	if n.lookup != nil {
		return n.lookup(ip)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var best string
	var at time.Time
	for d, l := range n.learned[ip.Unmap()] {
		if l.at.After(at) {
			best, at = d, l.at
		}
	}
	return best
}

// reason is the policy's reason for a verdict other than allowed.
func (n *netCollector) reason(domain string, ip netip.Addr, port uint16, proto string) string {
	if n.egress == nil {
		return ""
	}
	return n.egress.EgressReason(domain, ip, port, proto)
}

// sweep removes expired learned domains every netSweepInterval.
func (n *netCollector) sweep() {
	defer close(n.done)
	t := time.NewTicker(netSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case now := <-t.C:
			n.mu.Lock()
			for ip, m := range n.learned {
				expired := false
				for _, l := range m {
					if now.After(l.expires) {
						expired = true
						break
					}
				}
				if expired {
					n.writeDomain(ip, now)
				}
			}
			n.mu.Unlock()
		}
	}
}

// redirect sets or clears the DNS proxy of a watched cgroup.
func (n *netCollector) redirect(cgroupID uint64, v4, v6 netip.AddrPort) error {
	var t netDnsTarget
	if v4.IsValid() {
		if !v4.Addr().Unmap().Is4() || v4.Port() == 0 {
			return fmt.Errorf("redirecting DNS of cgroup %d: IPv4 proxy address %s is not an IPv4 address and port", cgroupID, v4)
		}
		t.V4 = netNetAddr{Addr: addrWordsFamily(v4.Addr().Unmap()), Port: v4.Port(), Family: unix.AF_INET}
	}
	if v6.IsValid() {
		if !v6.Addr().Is6() || v6.Addr().Is4In6() || v6.Port() == 0 {
			return fmt.Errorf("redirecting DNS of cgroup %d: IPv6 proxy address %s is not an IPv6 address and port", cgroupID, v6)
		}
		t.V6 = netNetAddr{Addr: addrWordsFamily(v6.Addr()), Port: v6.Port(), Family: unix.AF_INET6}
	}
	if !v4.IsValid() && !v6.IsValid() {
		return fmt.Errorf("redirecting DNS of cgroup %d: no proxy address", cgroupID)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.objs.DnsRedirect.Put(cgroupID, t); err != nil {
		return fmt.Errorf("redirecting DNS of cgroup %d: %w", cgroupID, err)
	}
	n.redirects[cgroupID] = true
	return nil
}

// unredirect clears the DNS redirect of a cgroup, if it has one.
func (n *netCollector) unredirect(cgroupID uint64) error {
	if !n.loaded {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.redirects[cgroupID] {
		return nil
	}
	delete(n.redirects, cgroupID)
	if err := n.objs.DnsRedirect.Delete(cgroupID); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("clearing DNS redirect of cgroup %d: %w", cgroupID, err)
	}
	return nil
}

// DNSSender returns the process that made the latest redirected connect or
// send of the socket whose cookie is cookie (peercred.SocketOf finds it
// from a query's addresses): its pid (thread group), uid and comm, as the
// kernel saw them then. ok is false when the kernel has no record of the
// socket (its traffic was not redirected, or its record was evicted by
// 16384 newer ones) and after Close. It does not block beyond one map
// lookup.
func (c *Collector) DNSSender(cookie uint64) (p event.Proc, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed || !c.net.loaded {
		return event.Proc{}, false
	}
	var s netDnsSender
	if err := c.net.objs.DnsSenders.Lookup(cookie, &s); err != nil {
		return event.Proc{}, false
	}
	return event.Proc{Pid: int32(s.Pid), UID: event.U32(s.Uid), Comm: cString(s.Comm[:])}, true
}

// ConnSender returns the process that made the recorded TCP connection
// whose socket has cookie (the kernel's record of its connect, kept while
// the connection is open: a connection of a watched cgroup), with the
// session it belongs to. The mirror names the process behind each fetch
// with it, by the cookie sock_diag gives for its client's socket.
func (c *Collector) ConnSender(cookie uint64) (p event.Proc, session string, ok bool) {
	c.mu.RLock()
	if c.closed || !c.net.loaded {
		c.mu.RUnlock()
		return event.Proc{}, "", false
	}
	var conn netConn
	err := c.net.objs.Conns.Lookup(cookie, &conn)
	c.mu.RUnlock()
	if err != nil {
		return event.Proc{}, "", false
	}
	return event.Proc{Pid: int32(conn.Hdr.Pid), UID: event.U32(conn.Uid), Comm: cString(conn.Hdr.Comm[:]),
		CgroupID: conn.Hdr.CgroupId}, c.session(conn.Hdr.Watched), true
}

// addrWordsFamily stores a in the layout of struct net_addr: an IPv4
// address in the first word, an IPv6 one in all four.
func addrWordsFamily(a netip.Addr) [4]uint32 {
	var w [4]uint32
	if a.Is4() {
		b := a.As4()
		copy(asBytes(&w), b[:])
		return w
	}
	return addrWords(a)
}

// LearnDomain tells the collector that the DNS proxy answered domain with
// ip, valid for ttl. With an egress policy, connections to ip are then
// decided as connections to domain (blocked domains, DoH endpoints and
// allowed domains) until the ttl runs out; an address answered for several
// live domains gets the union of their classes, so a blocked one wins. The
// domain also names ip in net events when no WithDomainLookup is given. An
// address keeps at most 64 live domains (the one expiring first goes). It
// returns ErrClosed after Close, an error for an invalid ip, and an error
// when 65536 addresses are already known (the connection is then decided
// by its address alone).
func (c *Collector) LearnDomain(ip netip.Addr, domain string, ttl time.Duration) error {
	if !ip.IsValid() {
		return fmt.Errorf("learning domain %q: invalid address", domain)
	}
	if ttl <= 0 {
		ttl = time.Second
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	return c.net.learn(ip, domain, ttl)
}

// RedirectDNS sends port-53 traffic (UDP and TCP, connected or not) of the
// processes in the watched cgroup cgroupID to the DNS proxy at v4 (for
// IPv4 destinations) and v6 (for IPv6 destinations). With v6 invalid, IPv6
// port-53 traffic goes to v4 as a v4-mapped address, which a dual-stack
// socket reaches and an IPv6-only socket does not (ENETUNREACH); with v4
// invalid, IPv4 destinations are not redirected. Replies to
// unconnected sockets, and getpeername of connected ones, show the original
// server's address. Redirected traffic is not subject to the egress policy
// (the proxy enforces blocked domains); it is recorded with the original
// destination and a reason naming the proxy. Unwatch clears the redirect.
// It returns ErrClosed after Close, and an error when neither address is
// valid or an address is of the wrong family.
func (c *Collector) RedirectDNS(cgroupID uint64, v4, v6 netip.AddrPort) error {
	if cgroupID == 0 {
		return fmt.Errorf("redirecting DNS: id 0 is not a cgroup")
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	return c.net.redirect(cgroupID, v4, v6)
}

// netDropsKind is the kind reported for failed inserts into the net tables:
// a connection whose net.close is then not recorded.
const netDropsKind = event.KindNetClose
