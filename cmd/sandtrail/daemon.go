package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/daemon"
	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/record/ingest/server"
)

func newDaemonCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the recording daemon: the journal, the collector, sessions, the ingest and control sockets",
		Long: `The daemon is the one writer of the record. It owns the journal under
<data_dir>/journal, keeps the index (<data_dir>/index.db) following it, runs the
eBPF collector and the session manager, and serves two sockets:

  the ingest socket (--socket, world-writable): shims and the orchestrator send
    events. Every batch is attributed from the peer's credentials and cgroup,
    never from what it claims.
  the control socket (control.sock beside it, root only): sandtrail session and
    sandtrail run create, start, pause, resume, stop and clean up sessions;
    sandtrail retention and sandtrail hold prune and hold through it.

It runs one DNS proxy (config dns.*; off with dns.enabled false) and gives each
session its own proxy listeners: the collector redirects the session's port-53
traffic to them, and every lookup becomes a net.dns event of that session.
The proxy forwards to dns.upstream (--dns-upstream; default: the nameservers
of /etc/resolv.conf, and SERVFAIL with a warning when there are none), waits
dns.timeout per upstream, and answers NXDOMAIN for the policy's (config key
policy) egress.blocked_domains.

It applies the retention policy (retention.hot_days, default 90 days; see
sandtrail retention) every retention.interval (default 24h), the first time a
minute after it starts, and serves sandtrail retention and sandtrail hold.

It stops gracefully on SIGTERM or SIGINT: it stops accepting, lets batches in
flight finish, terminates running sessions (reason signal), and closes the
journal, which signs a final checkpoint.

Examples:
  sandtrail daemon                          # on the defaults, /etc/sandtrail/config.yaml
  SANDTRAIL_LOG_LEVEL=debug sandtrail daemon --data /srv/sandtrail`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Bound here, not at construction: emit binds the same key.
			g.bindFlag("socket", cmd.Flags().Lookup("socket"))
			bindDNSFlags(g, cmd)
			cfg, err := g.load()
			if err != nil {
				return err
			}
			return runDaemonHost(cmd.Context(), cfg, newLogger(cfg))
		},
	}
	f := cmd.Flags()
	f.String("socket", "/run/sandtrail/ingest.sock", "ingest socket path (env SANDTRAIL_SOCKET)")
	addDNSFlags(cmd)
	return cmd
}

// runDaemonHost is the daemon: a host with the ingest socket and the index
// follower, plus the control socket through which `sandtrail session` and
// `sandtrail run` drive its sessions. It runs until ctx is cancelled (by
// SIGTERM or SIGINT in main), then terminates the sessions still running
// (reason signal), cleans them up (keeping their directories) and closes
// the host, whose journal signs a final checkpoint.
func runDaemonHost(ctx context.Context, cfg *Config, log hclog.Logger) error {
	o := daemon.Options{Ingest: true, Index: true, Retention: true}
	if cfg.Mirror.Enabled {
		o.Mirror = cfg.Mirror.Listen
	}
	h, err := daemon.Start(cfg, log, o)
	if err != nil {
		return err
	}
	ctlPath := cfg.ControlSocket()
	ln, err := control.Listen(ctlPath)
	if err != nil {
		return errors.Join(err, h.Close())
	}
	ctl := control.Serve(ln, h, h.Attributor(), log)
	log.Info("daemon started", "journal", h.JournalDir(), "entries", h.JournalSize(), "socket", cfg.Socket,
		"control", ctlPath, "sessions", cfg.SessionsDir(), "index", cfg.IndexPath())
	var (
		serveErr error
		tick     <-chan time.Time
		last     server.Stats
	)
	if cfg.Ingest.StatsInterval > 0 {
		t := time.NewTicker(cfg.Ingest.StatsInterval)
		defer t.Stop()
		tick = t.C
	}
wait:
	for {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
			break wait
		case serveErr = <-h.IngestDone():
			serveErr = fmt.Errorf("serving ingest socket: %w", serveErr)
			break wait
		case <-tick:
			if st := h.IngestStats(); st != last {
				daemon.LogStats(log, "ingest stats", st)
				last = st
			}
		}
	}
	ctlErr := ctl.Close()
	start, size := time.Now(), h.JournalSize()
	closeErr := h.Close()
	// What each part took is logged at debug level ("host stopped").
	log.Info("host closed", "entries", size, "took", time.Since(start))
	return errors.Join(serveErr, ctlErr, closeErr)
}
