package dnsproxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	mdns "github.com/miekg/dns"
)

// ResolvConf returns the nameservers of the resolver configuration file at
// path as ip:port, in order. It returns ErrNoUpstream when the file names
// none, and an error when it cannot be read or names something that is not
// an IP address.
func ResolvConf(path string) ([]string, error) {
	cfg, err := mdns.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading resolver configuration: %w", err)
	}
	var out []string
	for _, s := range cfg.Servers {
		a, err := parseUpstream(net.JoinHostPort(s, cfg.Port))
		if err != nil {
			return nil, fmt.Errorf("reading resolver configuration %s: %w", path, err)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("reading resolver configuration %s: %w", path, ErrNoUpstream)
	}
	return out, nil
}

// parseUpstream normalizes an upstream address to ip:port.
func parseUpstream(s string) (string, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return "", fmt.Errorf("parsing upstream %q: port 0", s)
		}
		return ap.String(), nil
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return "", fmt.Errorf("parsing upstream %q: not an IP address with optional port", s)
	}
	return netip.AddrPortFrom(a, 53).String(), nil
}

// Upstream returns the upstream resolvers, as ip:port, in the order they are
// tried.
func (p *Proxy) Upstream() []string { return append([]string(nil), p.upstream...) }

// forward asks the upstreams in order over proto and returns the first
// answer, with the client's message id, or SERVFAIL. When WithMaxInflight
// queries are already waiting it returns SERVFAIL at once.
func (p *Proxy) forward(req *mdns.Msg, proto string) *mdns.Msg {
	select {
	case p.inflight <- struct{}{}:
		defer func() { <-p.inflight }()
	default:
		p.shed.Add(1)
		resp := new(mdns.Msg)
		resp.SetRcode(req, mdns.RcodeServerFailure)
		return resp
	}
	base := p.base
	// The client sizes its read buffer from the query's EDNS(0) size, as
	// the upstream sizes its answer.
	c := &mdns.Client{Net: proto, Timeout: p.timeout}
	for _, u := range p.upstream {
		resp, err := p.exchange(base, c, req, u)
		if err != nil {
			p.log.Debug("upstream exchange failed", "upstream", u, "proto", proto, "error", err)
			continue
		}
		resp.Id = req.Id
		return resp
	}
	p.upstreamFailures.Add(1)
	resp := new(mdns.Msg)
	resp.SetRcode(req, mdns.RcodeServerFailure)
	return resp
}

// exchange asks one upstream. Over TCP it reuses an idle connection to the
// upstream when there is one; when that fails (the upstream closed it
// meanwhile) it dials a fresh one within the same timeout.
func (p *Proxy) exchange(base context.Context, c *mdns.Client, req *mdns.Msg, upstream string) (*mdns.Msg, error) {
	ctx, cancel := context.WithTimeout(base, p.timeout)
	defer cancel()
	tcp := c.Net == "tcp"
	if tcp {
		if conn := p.pool.get(upstream); conn != nil {
			resp, ok, err := exchangeOn(ctx, c, req, conn)
			if err == nil {
				p.keep(upstream, conn, ok)
				return resp, nil
			}
			conn.Close()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("exchanging with upstream: %w", err)
			}
		}
	}
	conn, err := c.DialContext(ctx, upstream)
	if err != nil {
		return nil, fmt.Errorf("dialing upstream: %w", err)
	}
	resp, ok, err := exchangeOn(ctx, c, req, conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("exchanging with upstream: %w", err)
	}
	if tcp {
		p.keep(upstream, conn, ok)
	} else {
		conn.Close()
	}
	return resp, nil
}

// keep puts a TCP connection back into the pool when its last exchange left
// it usable, and closes it otherwise.
func (p *Proxy) keep(upstream string, conn *mdns.Conn, ok bool) {
	if !ok {
		conn.Close()
		return
	}
	p.pool.put(upstream, conn)
}

// exchangeOn sends req on conn and reads the answer. miekg/dns honours only
// the context's deadline, so a cancelled context (Close) also sets the
// connection's deadline to end a wait at once; reusable is false when that
// happened, because the connection's deadline is then spent.
func exchangeOn(ctx context.Context, c *mdns.Client, req *mdns.Msg, conn *mdns.Conn) (resp *mdns.Msg, reusable bool, err error) {
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	resp, _, err = c.ExchangeWithConnContext(ctx, req.Copy(), conn)
	reusable = stop()
	return resp, reusable, err
}
