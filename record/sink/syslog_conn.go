package sink

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// syslogConn is one connection to a syslog receiver. A reader drains it
// (a receiver sends nothing, but TLS may) and notes when it ends, so that
// a receiver's death is seen as it happens, not at the next write.
type syslogConn struct {
	addr string
	c    net.Conn // the TLS connection, or tcp
	tcp  *net.TCPConn
	// dead is closed when the reader finds the connection ended, at
	// deadAt, with the read's error.
	dead    chan struct{}
	deadAt  time.Time
	deadErr error
}

// dialSyslog connects to addr, over TLS when cfg is not nil (the
// handshake verifies the receiver), within timeout.
func dialSyslog(ctx context.Context, addr string, cfg *tls.Config, timeout time.Duration) (*syslogConn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("syslog sink: connecting to %s: %w", addr, err)
	}
	c := &syslogConn{addr: addr, c: raw, tcp: raw.(*net.TCPConn), dead: make(chan struct{})}
	if cfg != nil {
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("syslog sink: TLS handshake with %s: %w", addr, err)
		}
		c.c = tc
	}
	go c.drain()
	return c, nil
}

// drain reads the connection until it ends.
func (c *syslogConn) drain() {
	buf := make([]byte, 512)
	for {
		if _, err := c.c.Read(buf); err != nil {
			c.deadAt, c.deadErr = time.Now(), err
			close(c.dead)
			return
		}
	}
}

// sendChunk bounds the bytes of one write.
const sendChunk = 256 << 10

// send writes the frames, each write of sendChunk within timeout, then
// waits for the receiver's TCP stack to acknowledge all of them (giving
// up when it acknowledges nothing more for timeout).
func (c *syslogConn) send(ctx context.Context, frames []sentFrame, timeout time.Duration) error {
	buf := make([]byte, 0, sendChunk)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		c.c.SetWriteDeadline(time.Now().Add(timeout))
		_, err := c.c.Write(buf)
		buf = buf[:0]
		if err != nil {
			return fmt.Errorf("syslog sink: writing to %s: %w", c.addr, err)
		}
		return nil
	}
	for _, f := range frames {
		if len(buf) > 0 && len(buf)+len(f.frame) > sendChunk {
			if err := flush(); err != nil {
				return err
			}
		}
		buf = append(buf, f.frame...)
	}
	if err := flush(); err != nil {
		return err
	}
	return c.waitAcked(ctx, timeout)
}

// waitAcked polls the socket until the receiver's TCP stack acknowledged
// every byte written (unackedBytes is 0). A receiver that acknowledges
// nothing more for timeout, or a connection that ended or left the
// established state, is an error.
func (c *syslogConn) waitAcked(ctx context.Context, timeout time.Duration) error {
	last, progress := -1, time.Now()
	wait := 100 * time.Microsecond
	for {
		select {
		case <-c.dead:
			return fmt.Errorf("syslog sink: %s closed the connection: %w", c.addr, c.deadErr)
		default:
		}
		n, err := unackedBytes(c.tcp)
		if err != nil {
			return fmt.Errorf("syslog sink: waiting for %s's acknowledgement: %w", c.addr, err)
		}
		if n == 0 {
			return nil
		}
		if now := time.Now(); last < 0 || n < last {
			last, progress = n, now
		} else if now.Sub(progress) > timeout {
			return fmt.Errorf("syslog sink: %s acknowledged none of %d bytes for %s", c.addr, n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.dead:
		case <-time.After(wait):
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// ended reports whether the reader found the connection ended.
func (c *syslogConn) ended() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

// close closes the connection, found broken, abruptly (no TLS
// close_notify to wait on), and returns when it was found broken: when
// the reader saw it end, or now.
func (c *syslogConn) close() time.Time {
	now := time.Now()
	select {
	case <-c.dead:
		now = c.deadAt
	default:
	}
	c.tcp.Close()
	return now
}
