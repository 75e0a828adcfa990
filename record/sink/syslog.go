package sink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// Syslog is a Sink that sends each entry as an RFC 5424 message
// (syslogFormat.message) to a receiver over TCP, or TLS (RFC 5425),
// octet-counted (RFC 6587 §3.4.1: MSG-LEN SP SYSLOG-MSG).
//
// Syslog has no acknowledgement of its own, so a Write returns once the
// batch is written and the receiver's TCP stack acknowledged every byte
// of it (the socket's unsent and unacknowledged bytes, SIOCOUTQ, are 0),
// polled while the receiver keeps acknowledging (for at most Timeout of
// no progress). That is not the receiver's word that it
// stored them: a receiver killed with messages in its queues has
// acknowledged what it lost. So the sink keeps the entries acknowledged
// in the ResendAge before a connection broke (at most ResendMax and
// ResendBytes of them), and the next connection sends them again before
// anything else. What a receiver holds is at least once, the seq (or a
// checkpoint's size) the dedupe key.
//
// Trust: TLS verifies the receiver (CAFile, or the system's roots, and
// ServerName) and has no switch to skip it; a handshake that fails is a
// failed Write, retried, never a fallback to plain TCP.
type Syslog struct {
	addr    string
	tls     *tls.Config // nil for plain TCP
	format  syslogFormat
	timeout time.Duration
	age     time.Duration
	keep    int
	bytes   int

	mu     sync.Mutex
	conn   *syslogConn
	closed bool
	// window holds the entries acknowledged lately, oldest first; when
	// resend is set a connection broke and the next one sends them first.
	window      []sentFrame
	windowBytes int
	resend      bool
	// resent counts the entries sent again on a new connection.
	resent uint64
}

var _ Sink = (*Syslog)(nil)

// sentFrame is an entry's frame, acknowledged by TCP at a time.
type sentFrame struct {
	seq   uint64
	frame []byte
	at    time.Time
}

// SyslogConfig configures a Syslog sink.
type SyslogConfig struct {
	// Address is the receiver's host:port.
	Address string
	// TLS sends over TLS 1.2 or later, verifying the receiver against
	// CAFile's certificates (PEM; the system's roots when empty) and
	// ServerName (the Address's host when empty); CertFile and KeyFile
	// are a client certificate to present, if the receiver asks for one.
	TLS                                   bool
	CAFile, CertFile, KeyFile, ServerName string
	// Facility is the PRI's facility, a name (kern ... local7) or 0-23
	// (DefaultSyslogFacility when empty).
	Facility string
	// Host names this machine: the HOSTNAME and the SD's host.
	Host string
	// SDID is the SD-ID of the element carrying the seq
	// (DefaultSyslogSDID when empty): name@private-enterprise-number.
	SDID string
	// MaxMessage bounds a message (DefaultSyslogMaxMessage when 0, at
	// least SyslogMinMessage); an entry past it is sent as a stub.
	MaxMessage int
	// Timeout bounds a dial and handshake, each write, and how long the
	// receiver may go acknowledging nothing of what was written (10s when
	// 0).
	Timeout time.Duration
	// ResendAge, ResendMax and ResendBytes bound what a new connection
	// sends again: the entries acknowledged in the ResendAge (10s) before
	// the last one broke, at most the newest ResendMax (10000) and
	// ResendBytes of frames (32 MiB).
	ResendAge   time.Duration
	ResendMax   int
	ResendBytes int
}

// NewSyslog checks c and reads its certificates; it does not connect:
// the first Write does, and every Write after a failed one.
func NewSyslog(c SyslogConfig) (*Syslog, error) {
	host, _, err := net.SplitHostPort(c.Address)
	if err != nil {
		return nil, fmt.Errorf("syslog sink: address %q: %w", c.Address, err)
	}
	facility, err := SyslogFacility(c.Facility)
	if err != nil {
		return nil, err
	}
	if c.SDID == "" {
		c.SDID = DefaultSyslogSDID
	}
	if !ValidSDID(c.SDID) {
		return nil, fmt.Errorf("syslog sink: sd_id %q: want name@private-enterprise-number, at most 32 characters", c.SDID)
	}
	if c.MaxMessage == 0 {
		c.MaxMessage = DefaultSyslogMaxMessage
	}
	if c.MaxMessage < SyslogMinMessage {
		return nil, fmt.Errorf("syslog sink: max message %d: want at least %d", c.MaxMessage, SyslogMinMessage)
	}
	s := &Syslog{addr: c.Address, timeout: orDefault(c.Timeout, 10*time.Second), age: orDefault(c.ResendAge, 10*time.Second),
		keep: orDefault(c.ResendMax, 10000), bytes: orDefault(c.ResendBytes, 32<<20), format: syslogFormat{facility: facility, hostname: printUSASCII(c.Host, maxHostname),
			procID: strconv.Itoa(os.Getpid()), sdID: c.SDID, max: c.MaxMessage}}
	if s.tls, err = syslogTLS(c, host); err != nil {
		return nil, err
	}
	return s, nil
}

// orDefault is v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// syslogTLS is c's TLS configuration, nil for plain TCP. TLS settings
// without TLS are an error: whoever wrote them meant to verify.
func syslogTLS(c SyslogConfig, host string) (*tls.Config, error) {
	if !c.TLS {
		if c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != "" {
			return nil, errors.New("syslog sink: ca_file, cert_file, key_file and server_name need tls: true")
		}
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("syslog sink: reading ca_file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("syslog sink: ca_file %s holds no PEM certificate", c.CAFile)
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("syslog sink: cert_file and key_file go together")
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("syslog sink: loading the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Write sends the batch and returns once the receiver's TCP stack
// acknowledged it. On a new connection (the first, or after a failure)
// it first sends again the entries of the resend window. Any failure
// closes the connection and returns the error: the Runner retries the
// batch.
func (s *Syslog) Write(ctx context.Context, batch []Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("syslog sink: closed")
	}
	frames := make([]sentFrame, len(batch))
	for i, e := range batch {
		frames[i] = sentFrame{seq: e.Seq, frame: s.format.frame(e)}
	}
	if s.conn != nil && s.conn.ended() {
		s.broke(nil)
	}
	if s.conn == nil {
		c, err := dialSyslog(ctx, s.addr, s.tls, s.timeout)
		if err != nil {
			return err
		}
		s.conn = c
	}
	if s.resend {
		if err := s.conn.send(ctx, s.window, s.timeout); err != nil {
			return s.broke(err)
		}
		now := time.Now()
		for i := range s.window {
			s.window[i].at = now
		}
		s.resent += uint64(len(s.window))
		s.resend = false
	}
	if err := s.conn.send(ctx, frames, s.timeout); err != nil {
		return s.broke(err)
	}
	s.remember(frames, time.Now())
	return nil
}

// broke closes the connection after err and marks the window for
// resending: the entries acknowledged in the ResendAge before the
// connection was found broken (or, when it broke before, kept as they
// are: they are yet to be sent again). It returns err.
func (s *Syslog) broke(err error) error {
	at := s.conn.close()
	s.conn = nil
	if !s.resend {
		s.prune(at)
		s.resend = true
	}
	return err
}

// remember adds frames, acknowledged at now, to the window, and drops
// from it what is older than ResendAge or past ResendMax or ResendBytes.
func (s *Syslog) remember(frames []sentFrame, now time.Time) {
	for i := range frames {
		frames[i].at = now
	}
	s.window = append(s.window, frames...)
	for _, f := range frames {
		s.windowBytes += len(f.frame)
	}
	s.prune(now)
}

// prune drops from the window the entries acknowledged more than
// ResendAge before t and the oldest past ResendMax or ResendBytes.
func (s *Syslog) prune(t time.Time) {
	i := 0
	for i < len(s.window) && (s.window[i].at.Before(t.Add(-s.age)) || len(s.window)-i > s.keep || s.windowBytes > s.bytes) {
		s.windowBytes -= len(s.window[i].frame)
		i++
	}
	if i > 0 {
		s.window = append(s.window[:0:0], s.window[i:]...)
	}
}

// Close closes the connection; the entries of its window not yet sent
// again are dropped.
func (s *Syslog) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.conn == nil {
		return nil
	}
	err := s.conn.c.Close() // over TLS, with a close_notify
	s.conn = nil
	return err
}
