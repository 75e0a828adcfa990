package dnsproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	mdns "github.com/miekg/dns"
)

// Addr returns the address of the shared listener (UDP and TCP share the
// port), or the zero AddrPort before Listen.
func (p *Proxy) Addr() netip.AddrPort {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.main == nil {
		return netip.AddrPort{}
	}
	return p.main.addr
}

// ListenAndServe listens on addr ("127.0.0.1:53"; port 0 picks a free port
// for both UDP and TCP) and serves until ctx is done or Close is called. It
// returns nil after a Close or the end of ctx.
func (p *Proxy) ListenAndServe(ctx context.Context, addr string) error {
	if err := p.Listen(addr); err != nil {
		return err
	}
	return p.Serve(ctx)
}

// Listen binds the shared listener's UDP and TCP sockets on addr without
// serving yet, so that Addr is known before Serve runs. Queries on it are
// attributed to sessions by WithSession.
func (p *Proxy) Listen(addr string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.main != nil {
		return ErrListening
	}
	l, err := listenPair(addr)
	if err != nil {
		return err
	}
	p.main = l
	return nil
}

// Serve serves the shared listener bound by Listen until ctx is done or
// Close is called, and then closes the proxy.
func (p *Proxy) Serve(ctx context.Context) error {
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return ErrClosed
	case p.main == nil:
		p.mu.Unlock()
		return ErrNotListening
	case p.serving:
		p.mu.Unlock()
		return ErrListening
	}
	p.serving = true
	l, ready := p.main, make(chan struct{})
	p.ready = ready
	p.mu.Unlock()

	// Close waits for ready, so that it never races a server that has not
	// started yet (its shutdown would fail, and the server would run on).
	err := l.start(p, p)
	close(ready)
	if err == nil {
		select {
		case <-ctx.Done():
		case <-p.base.Done():
		case err = <-l.stopped():
		}
	}
	// A server that returns after the caller's Close or the end of ctx was
	// shut down; only a server that stopped on its own is an error.
	p.mu.Lock()
	stopped := p.closed || ctx.Err() != nil
	p.mu.Unlock()
	p.Close()
	if err != nil && !stopped {
		return fmt.Errorf("serving dns: %w", err)
	}
	return nil
}

// pair is a UDP and a TCP socket bound to the same address and port, each
// served by its own miekg/dns server once started.
type pair struct {
	pc      net.PacketConn
	ln      net.Listener
	addr    netip.AddrPort
	servers []*server
	wait    time.Duration // how long stop waits for queries being answered
	stopMu  sync.Mutex
	done    bool
}

// server is one miekg/dns server of a pair and the result of its serve
// loop.
type server struct {
	proto   string
	s       *mdns.Server
	started bool       // its serve loop ran
	result  chan error // ActivateAndServe's result, once
}

// listenPair binds UDP and TCP on addr. With port 0 the kernel picks a UDP
// port that may be taken for TCP: it tries again a few times.
func listenPair(addr string) (*pair, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("parsing listen address: %w", err)
	}
	var lastErr error
	for range 16 {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, fmt.Errorf("listening on udp %s: %w", addr, err)
		}
		uaddr := pc.LocalAddr().(*net.UDPAddr)
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(uaddr.Port)))
		if err != nil {
			pc.Close()
			lastErr = err
			if port == "0" && errors.Is(err, syscall.EADDRINUSE) {
				continue
			}
			break
		}
		ap := uaddr.AddrPort()
		return &pair{pc: pc, ln: ln, addr: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}, nil
	}
	return nil, fmt.Errorf("listening on tcp %s: %w", addr, lastErr)
}

// start starts both servers with handler h and waits until each has
// started or failed. It returns the errors of those that failed; the
// caller then stops the pair.
func (l *pair) start(p *Proxy, h mdns.Handler) error {
	l.stopMu.Lock()
	defer l.stopMu.Unlock()
	mk := func(proto string, s *mdns.Server) *server {
		s.Handler, s.MsgAcceptFunc, s.MsgInvalidFunc = h, p.accept, p.invalid
		return &server{proto: proto, s: s, result: make(chan error, 1)}
	}
	udp := mk("udp", &mdns.Server{PacketConn: l.pc})
	tcp := mk("tcp", &mdns.Server{Listener: l.ln, ReadTimeout: p.timeout + 2*time.Second,
		IdleTimeout: func() time.Duration { return 10 * time.Second }})
	l.servers = []*server{udp, tcp}
	l.wait = time.Duration(len(p.upstream)+1)*p.timeout + 2*time.Second
	var errs []error
	for _, s := range l.servers {
		started := make(chan struct{})
		s.s.NotifyStartedFunc = func() { close(started) }
		go func() { s.result <- s.s.ActivateAndServe() }()
		select {
		case <-started:
			s.started = true
		case err := <-s.result:
			s.result <- err // keep it for stop and stopped
			errs = append(errs, fmt.Errorf("starting %s server on %s: %w", s.proto, l.addr, err))
		}
	}
	return errors.Join(errs...)
}

// stopped returns a channel that receives the first error of a server whose
// serve loop ended.
func (l *pair) stopped() <-chan error {
	out := make(chan error, len(l.servers))
	for _, s := range l.servers {
		go func() {
			err := <-s.result
			s.result <- err
			if err == nil {
				err = errors.New("server stopped")
			}
			out <- err
		}()
	}
	return out
}

// stop shuts the started servers down and closes the sockets. It is safe
// to call more than once.
func (l *pair) stop() error {
	l.stopMu.Lock()
	defer l.stopMu.Unlock()
	if l.done {
		return nil
	}
	l.done = true
	var errs []error
	for _, s := range l.servers {
		if !s.started {
			continue
		}
		// Shutdown waits for the queries being answered, which wait at
		// most one upstream timeout per upstream (Close ends them at once).
		ctx, cancel := context.WithTimeout(context.Background(), l.wait)
		if err := s.s.ShutdownContext(ctx); err != nil {
			errs = append(errs, err)
		}
		// The serve loop closes its socket as it returns, racing
		// Shutdown's own close: the close that loses returns before the
		// socket is released. Waiting for the loop means the port is free
		// when stop returns.
		select {
		case err := <-s.result:
			s.result <- err
		case <-ctx.Done():
		}
		cancel()
	}
	// Closing twice (after the servers did) only returns an error that
	// does not matter.
	_ = l.pc.Close()
	_ = l.ln.Close()
	return errors.Join(errs...)
}

// addrPort converts a socket address; other addresses become the zero value.
func addrPort(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.UDPAddr:
		ap = a.AddrPort()
	case *net.TCPAddr:
		ap = a.AddrPort()
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
