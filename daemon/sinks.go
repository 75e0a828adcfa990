package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/ocsf"
	"github.com/sandtrail/sandtrail/record/sink"
)

// SinkConfig is one sink of the daemon's config: where the record streams
// to as it is journaled (docs/sinks.md).
type SinkConfig struct {
	// Name names it (its cursor file, logs, status); unique.
	Name string `mapstructure:"name"`
	// Type is file, stdout, nats, hec, otlp or syslog.
	Type string `mapstructure:"type"`
	// Format is jsonl (the stored events, the default) or ocsf.
	Format string `mapstructure:"format"`
	// Path is a file sink's file; MaxSize its size before it rotates
	// ("100M", the default), Keep the rotated files kept (10).
	Path    string `mapstructure:"path"`
	MaxSize string `mapstructure:"max_size"`
	Keep    int    `mapstructure:"keep"`
	// A hec sink's url is the collector's base (https://splunk:8088), an
	// otlp sink's the receiver's (http://127.0.0.1:4318; /v1/logs is
	// appended). Token or TokenFile (root's) is a hec sink's HEC token,
	// Index its index (the token's default when empty), AckTimeout its
	// wait for indexer acks (60s); Headers are an otlp sink's extra
	// headers. CAFile is the only CA a hec or otlp sink's https receiver
	// or syslog sink's TLS receiver may chain to (the system's roots when
	// empty); Compression gzip (the default) or none.
	Token       string            `mapstructure:"token"`
	TokenFile   string            `mapstructure:"token_file"`
	Index       string            `mapstructure:"index"`
	AckTimeout  time.Duration     `mapstructure:"ack_timeout"`
	Headers     map[string]string `mapstructure:"headers"`
	CAFile      string            `mapstructure:"ca_file"`
	Compression string            `mapstructure:"compression"`
	// URL is a nats sink's server (nats://127.0.0.1:4222, several
	// comma-separated); Stream its JetStream stream (SANDTRAIL),
	// Replicas the stream's replicas (1), Duplicates the stream's
	// duplicate window (10m), CredsFile the host's NATS credentials (a
	// .creds file: the account's JWT and the host's nkey), and ca_file
	// the CA of a tls:// server.
	URL        string        `mapstructure:"url"`
	Stream     string        `mapstructure:"stream"`
	Replicas   int           `mapstructure:"replicas"`
	Duplicates time.Duration `mapstructure:"duplicates"`
	CredsFile  string        `mapstructure:"creds_file"`
	// A syslog sink's (sink.SyslogConfig): RFC 5424 to Address
	// (host:port) over TCP, or with TLS verified against ca_file and
	// server_name, presenting cert_file and key_file when set.
	Address    string `mapstructure:"address"`
	TLS        bool   `mapstructure:"tls"`
	CertFile   string `mapstructure:"cert_file"`
	KeyFile    string `mapstructure:"key_file"`
	ServerName string `mapstructure:"server_name"`
	// Facility is the PRI's (local0 when empty); SDID the SD-ID of the
	// element carrying the seq (sandtrail@32473).
	Facility string `mapstructure:"facility"`
	SDID     string `mapstructure:"sd_id"`
	// MaxMessage bounds a message ("64k"); ResendAge and ResendMax bound
	// what a new connection sends again (10s, 10000 entries).
	MaxMessage string        `mapstructure:"max_message"`
	ResendAge  time.Duration `mapstructure:"resend_age"`
	ResendMax  int           `mapstructure:"resend_max"`
}

// SinksDir holds the sinks' cursors: <data_dir>/sinks.
func (c *Config) SinksDir() string { return filepath.Join(c.DataDir, "sinks") }

// sinkRun is a started sink.
type sinkRun struct {
	r      *sink.Runner
	s      sink.Sink
	cancel context.CancelFunc
	done   chan error
}

// newSink is the Sink of one config entry.
func newSink(ctx context.Context, sc SinkConfig, host string) (sink.Sink, error) {
	switch sc.Type {
	case "hec":
		s, err := sink.NewHEC(sink.HECConfig{Name: sc.Name, URL: sc.URL, Token: sc.Token, TokenFile: sc.TokenFile, Index: sc.Index, Host: host,
			Format: sc.Format, CAFile: sc.CAFile, Compression: sc.Compression, AckTimeout: sc.AckTimeout})
		if err != nil {
			return nil, fmt.Errorf("sink %s: %w", sc.Name, err)
		}
		return s, nil
	case "otlp":
		s, err := sink.NewOTLP(sink.OTLPConfig{Endpoint: sc.URL, Headers: sc.Headers, Host: host, CAFile: sc.CAFile, Compression: sc.Compression})
		if err != nil {
			return nil, fmt.Errorf("sink %s: %w", sc.Name, err)
		}
		return s, nil
	case "file":
		if sc.Path == "" {
			return nil, fmt.Errorf("sink %s: a file sink needs path", sc.Name)
		}
		max, err := policies.ParseSize(sc.MaxSize)
		if err != nil {
			return nil, fmt.Errorf("sink %s: max_size: %w", sc.Name, err)
		}
		return sink.NewFile(sc.Path, max, sc.Keep)
	case "stdout":
		return sink.NewStream(os.Stdout), nil
	case "nats":
		if sc.URL == "" {
			return nil, fmt.Errorf("sink %s: a nats sink needs url", sc.Name)
		}
		return sink.NewNATS(ctx, sink.NATSConfig{URL: sc.URL, Stream: sc.Stream, Replicas: sc.Replicas, Host: host,
			Duplicates: sc.Duplicates, CredsFile: sc.CredsFile, CAFile: sc.CAFile})
	case "syslog":
		return newSyslogSink(sc, host)
	}
	return nil, fmt.Errorf("sink %s: type %q: want file, stdout, nats, hec, otlp or syslog", sc.Name, sc.Type)
}

// newSyslogSink is a syslog sink's Sink.
func newSyslogSink(sc SinkConfig, host string) (sink.Sink, error) {
	c := sc
	if c.Address == "" {
		return nil, fmt.Errorf("sink %s: a syslog sink needs address (host:port)", sc.Name)
	}
	max, err := policies.ParseSize(c.MaxMessage)
	if err != nil {
		return nil, fmt.Errorf("sink %s: max_message: %w", sc.Name, err)
	}
	s, err := sink.NewSyslog(sink.SyslogConfig{Address: c.Address, TLS: c.TLS, CAFile: c.CAFile, CertFile: c.CertFile,
		KeyFile: c.KeyFile, ServerName: c.ServerName, Facility: c.Facility, Host: host, SDID: c.SDID, MaxMessage: int(max),
		ResendAge: c.ResendAge, ResendMax: c.ResendMax})
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", sc.Name, err)
	}
	return s, nil
}

// startSinks starts a Runner for each configured sink, following the
// journal from its cursor.
func (d *Daemon) startSinks(ctx context.Context) error {
	seen := map[string]bool{}
	for _, sc := range d.cfg.Sinks {
		if seen[sc.Name] {
			return fmt.Errorf("sinks: %q is named twice", sc.Name)
		}
		seen[sc.Name] = true
		s, err := newSink(ctx, sc, d.cfg.Host)
		if err != nil {
			return err
		}
		r, err := sink.NewRunner(sink.Config{Name: sc.Name, Format: sc.Format, JournalDir: d.jdir, CursorDir: d.cfg.SinksDir(),
			Product: ocsf.Sandtrail()}, s, d.j)
		if err != nil {
			s.Close()
			return err
		}
		rctx, cancel := context.WithCancel(ctx)
		run := &sinkRun{r: r, s: s, cancel: cancel, done: make(chan error, 1)}
		go func() { run.done <- r.Run(rctx) }()
		d.sinks = append(d.sinks, run)
	}
	return nil
}

var _ control.SinkReporter = (*Daemon)(nil)

// Sinks returns the status of each sink.
func (d *Daemon) Sinks() []sink.Status {
	var out []sink.Status
	for _, s := range d.sinks {
		out = append(out, s.r.Status())
	}
	return out
}

// stopSinks stops the sinks, then lets each send what the journal holds
// past its cursor and the newest checkpoint (for at most wait in all).
// What a sink has not sent by then, it sends after the next start, from
// its cursor.
func (d *Daemon) stopSinks(wait time.Duration) error {
	var errs []error
	for _, s := range d.sinks {
		s.cancel()
		if err := <-s.done; err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, s := range d.sinks {
		if err := s.r.Drain(ctx); err != nil {
			d.log.Warn("sink stopped behind the journal; it resumes from its cursor", "sink", s.r.Status().Name, "error", err)
		}
		errs = append(errs, s.s.Close())
	}
	d.sinks = nil
	return errors.Join(errs...)
}
