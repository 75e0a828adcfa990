package dnsproxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/kernel/peercred"
	"github.com/sandtrail/sandtrail/record/event"
)

// CheckSocketLookup reports whether this host lets the proxy find the
// socket that sent a query (sock_diag for UDP and TCP with the socket's
// cgroup id, Linux 5.7 and later), which WithCgroup needs. It returns
// the reason when not.
func CheckSocketLookup() error {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("checking socket lookup: %w", err)
	}
	defer pc.Close()
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		return fmt.Errorf("checking socket lookup: %w", err)
	}
	defer c.Close()
	if _, err := peercred.SocketCgroup("udp", addrPort(c.LocalAddr()), addrPort(pc.LocalAddr())); err != nil {
		return fmt.Errorf("checking socket lookup over udp: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("checking socket lookup: %w", err)
	}
	defer ln.Close()
	tc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return fmt.Errorf("checking socket lookup: %w", err)
	}
	defer tc.Close()
	if _, err := peercred.SocketCgroup("tcp", addrPort(tc.LocalAddr()), addrPort(ln.Addr())); err != nil {
		return fmt.Errorf("checking socket lookup over tcp: %w", err)
	}
	return nil
}

// listenerCgroups is the proxy's session table for the attribution step:
// the session whose listeners have a cgroup id (WithCgroup).
type listenerCgroups struct{ p *Proxy }

func (l listenerCgroups) Lookup(cg uint64) (string, bool) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	for id, s := range l.p.sessions {
		if s != nil && s.cgroup != 0 && s.cgroup == cg {
			return id, true
		}
	}
	return "", false
}

// errNoSocketLookup stands for the sending socket of a query that nothing
// asked sock_diag about.
var errNoSocketLookup = errors.New("dns: sending socket not looked up")

// socketOf asks the kernel, through the attribution step, for the socket
// that sent a query from src to dst when the listener checks its cgroup
// (not 0) or WithSender names its process, and returns errNoSocketLookup
// otherwise.
func (p *Proxy) socketOf(proto string, src, dst netip.AddrPort, cgroup uint64) (attribution.Client, error) {
	if cgroup == 0 && p.sender == nil {
		return attribution.Client{}, errNoSocketLookup
	}
	return p.clients.Socket(proto, src, dst)
}

// senderOf is the process that sent a query from c's socket, or nil when
// WithSender is not set, the socket was not found (no cookie) or the
// sender does not know it. A socket found without a cgroup id still names
// its process.
func (p *Proxy) senderOf(c attribution.Client) *event.Proc {
	sk := c.Socket
	if p.sender == nil || sk.Cookie == 0 {
		return nil
	}
	proc, ok := p.sender(sk.Cookie)
	if !ok {
		return nil
	}
	proc.CgroupID = sk.Cgroup
	return &proc
}

// verifySender checks that the socket that sent a query from src on
// session sid's listener (c, found unless err) was created in the
// session's cgroup. When it was not, or cannot be found, ok is false and
// the query is to be refused; owner is then the session it is recorded
// under (the one owning the sender's cgroup, or none) and reason says why.
func (p *Proxy) verifySender(c attribution.Client, err error, proto string, src netip.AddrPort, sid string, cgroup uint64) (owner, reason string, ok bool) {
	got := c.Socket.Cgroup
	switch {
	case err != nil:
		p.unverified.Add(1)
		p.log.Debug("query sender not verified", "session_id", sid, "proto", proto, "src", src, "error", err)
		return "", fmt.Sprintf("query to the DNS listener of session %s from %s: sending socket not found (%v)", sid, src, err), false
	case got != cgroup:
		p.foreign.Add(1)
		return c.Session, fmt.Sprintf("query to the DNS listener of session %s from a socket of cgroup %d, not the session's", sid, got), false
	}
	return "", "", true
}
