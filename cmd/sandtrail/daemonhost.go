package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/record/ingest/server"
)

// runDaemonHost is the daemon: a host with the ingest socket and the index
// follower, plus the control socket through which `sandtrail session` and
// `sandtrail run` drive its sessions. It runs until ctx is cancelled (by
// SIGTERM or SIGINT in main), then terminates the sessions still running
// (reason signal), cleans them up (keeping their directories) and closes
// the host, whose journal signs a final checkpoint.
func runDaemonHost(ctx context.Context, cfg *Config, log hclog.Logger) error {
	h, err := startHost(cfg, log, hostOptions{ingest: true, index: true})
	if err != nil {
		return err
	}
	ctl, err := startControl(h, log)
	if err != nil {
		return errors.Join(err, h.Close())
	}
	log.Info("daemon started", "journal", h.jdir, "entries", h.j.Size(), "socket", cfg.Socket,
		"control", ctl.path, "sessions", sessionsDir(cfg), "index", filepath.Join(cfg.DataDir, "index.db"))
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
		case serveErr = <-h.ingestDone():
			serveErr = fmt.Errorf("serving ingest socket: %w", serveErr)
			break wait
		case <-tick:
			if st := h.srv.Stats(); st != last {
				logStats(log, "ingest stats", st)
				last = st
			}
		}
	}
	ctlErr := ctl.Close()
	start, size := time.Now(), h.j.Size()
	closeErr := h.Close()
	log.Info("journal closed", "entries", size, "took", time.Since(start))
	return errors.Join(serveErr, ctlErr, closeErr)
}
