package dnsproxy

import (
	"net"
	"strings"

	mdns "github.com/miekg/dns"
)

// accept applies miekg/dns's default checks (a query, one question, at most
// one additional record) and counts what they reject.
func (p *Proxy) accept(dh mdns.Header) mdns.MsgAcceptAction {
	a := mdns.DefaultMsgAcceptFunc(dh)
	if a != mdns.MsgAccept {
		p.malformed.Add(1)
	}
	return a
}

// invalid counts packets that could not be parsed.
func (p *Proxy) invalid(_ []byte, _ error) { p.malformed.Add(1) }

var _ mdns.Handler = (*Proxy)(nil)

// ServeDNS answers one parsed query on the shared listener; its session
// comes from WithSession. See serve.
func (p *Proxy) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) { p.serve(w, req, "", false, 0) }

// serve answers one parsed query: REFUSED when it must come from cgroup
// (not 0) and does not, NXDOMAIN when the policy blocks the name, otherwise
// the first upstream answer, or SERVFAIL when no upstream answered. It
// learns the answer's addresses, writes the answer, then emits its event.
// The query belongs to session sid when fixed (a session's own listener),
// otherwise to the session WithSession names for its source.
func (p *Proxy) serve(w mdns.ResponseWriter, req *mdns.Msg, sid string, fixed bool, cgroup uint64) {
	proto := "udp"
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		proto = "tcp"
	}
	if len(req.Question) != 1 {
		// The accept function lets through only one question; never trust
		// that alone.
		p.malformed.Add(1)
		resp := new(mdns.Msg)
		resp.SetRcodeFormatError(req)
		_ = w.WriteMsg(resp)
		return
	}
	q := req.Question[0]
	name := queryName(q.Name)
	src, dst := addrPort(w.RemoteAddr()), addrPort(w.LocalAddr())
	if !fixed {
		sid, _ = p.session(src)
	}
	var (
		resp    *mdns.Msg
		verdict = "allowed"
		reason  string
	)
	sk, skErr := p.socketOf(proto, src, dst, cgroup)
	if cgroup != 0 {
		if owner, why, ok := p.verifySender(sk, skErr, proto, src, sid, cgroup); !ok {
			sid, verdict, reason = owner, "blocked", why
			resp = new(mdns.Msg)
			resp.SetRcode(req, mdns.RcodeRefused)
		}
	}
	if resp == nil {
		if blocked, why := p.policy(name); blocked {
			verdict, reason = "blocked", why
			resp = blockedReply(req, why)
			p.blocked.Add(1)
		} else {
			resp = p.forward(req, proto)
		}
	}
	// Learn before answering: the client may connect to an address as
	// soon as it has the answer.
	if verdict == "allowed" && resp.Rcode == mdns.RcodeSuccess {
		p.learn(name, resp, p.now())
	}
	if err := w.WriteMsg(resp); err != nil {
		p.log.Debug("writing response failed", "proto", proto, "query", name, "error", err)
	}
	p.queries.Add(1)
	ev := p.toEvent(p.now(), sid, proto, src, dst, verdict, reason, q, resp)
	ev.Proc = p.senderOf(sk)
	p.emit(ev)
}

// blockedReply is the NXDOMAIN answer to a blocked query. A client that
// speaks EDNS(0) also gets an Extended DNS Error "Blocked" (RFC 8914) with
// the reason as its text.
func blockedReply(req *mdns.Msg, reason string) *mdns.Msg {
	resp := new(mdns.Msg)
	resp.SetRcode(req, mdns.RcodeNameError)
	resp.RecursionAvailable = true
	if opt := req.IsEdns0(); opt != nil {
		o := resp.SetEdns0(opt.UDPSize(), false).IsEdns0()
		o.Option = append(o.Option, &mdns.EDNS0_EDE{InfoCode: mdns.ExtendedErrorCodeBlocked, ExtraText: reason})
	}
	return resp
}

// queryName is name in lower case without the trailing dot; the root is ".".
func queryName(name string) string {
	n := strings.TrimSuffix(strings.ToLower(name), ".")
	if n == "" {
		return "."
	}
	return n
}
