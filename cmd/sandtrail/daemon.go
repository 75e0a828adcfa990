package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/ingest/server"
	"github.com/sandtrail/sandtrail/record/journal"
)

func newDaemonCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the recording daemon: the journal, the collector, sessions, the ingest and control sockets",
		Long: `The daemon owns the journal under <data_dir>/journal and serves the ingest
socket, through which shims and the orchestrator send events. Every batch is
attributed from the peer's credentials and cgroup, never from what it claims.

It stops gracefully on SIGTERM or SIGINT: it stops accepting, lets batches in
flight finish, and closes the journal, which signs a final checkpoint.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Bound here, not at construction: emit binds the same key.
			g.bindFlag("socket", cmd.Flags().Lookup("socket"))
			cfg, err := g.load()
			if err != nil {
				return err
			}
			return runDaemonHost(cmd.Context(), cfg, cfg.logger())
		},
	}
	f := cmd.Flags()
	f.String("socket", "/run/sandtrail/ingest.sock", "ingest socket path (env SANDTRAIL_SOCKET)")
	return cmd
}

// runDaemon runs until ctx is cancelled (by SIGTERM or SIGINT in main).
func runDaemon(ctx context.Context, cfg *Config, log hclog.Logger) error {
	mode, err := strconv.ParseUint(cfg.Ingest.SocketMode, 8, 32)
	if err != nil || mode > 0o777 {
		return fmt.Errorf("config: ingest.socket_mode %q is not an octal file mode", cfg.Ingest.SocketMode)
	}
	signer, err := journal.LoadSigner(cfg.KeyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("loading signing key: %s does not exist; create it with `sandtrail keys generate` (or run install.sh)", cfg.KeyFile)
	}
	if err != nil {
		return fmt.Errorf("loading signing key: %w", err)
	}
	jdir := filepath.Join(cfg.DataDir, "journal")
	j, err := journal.Open(jdir, signer,
		journal.WithLogger(log),
		journal.WithHost(cfg.Host),
		journal.WithOrigin(cfg.Origin),
		journal.WithCheckpointEvery(cfg.Checkpoint.Every),
		journal.WithCheckpointInterval(cfg.Checkpoint.Interval))
	if err != nil {
		return fmt.Errorf("opening journal: %w", err)
	}
	closeJournal := func() error {
		if err := j.Close(); err != nil {
			return fmt.Errorf("closing journal: %w", err)
		}
		return nil
	}

	// Session management registers each session's cgroup here.
	sessions := server.NewTable()
	srv := server.New(j, sessions,
		server.WithLogger(log),
		server.WithHost(cfg.Host),
		server.WithMaxConns(cfg.Ingest.MaxConns),
		server.WithDedupSize(cfg.Ingest.DedupSize),
		server.WithIdleTimeout(cfg.Ingest.IdleTimeout))
	n, err := srv.RememberTail(j.Size(), uint64(max(cfg.Ingest.DedupSize, 0)), func(from uint64, fn func(uint64, []byte) error) error {
		return journal.Scan(jdir, from, fn)
	})
	if err != nil {
		_ = closeJournal()
		return err
	}
	ln, err := server.Listen(cfg.Socket, os.FileMode(mode))
	if err != nil {
		_ = closeJournal()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	// The index follows the journal in the background. It is derived
	// data: when it fails the daemon keeps recording, and `sandtrail
	// query` or `sandtrail reindex` catch it up later.
	followCtx, stopFollow := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		followIndex(followCtx, filepath.Join(cfg.DataDir, "index.db"), jdir, j, log)
	}()
	log.Info("daemon started", "journal", jdir, "entries", j.Size(), "socket", cfg.Socket, "remembered_ids", n)

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
		case serveErr = <-served:
			serveErr = fmt.Errorf("serving ingest socket: %w", serveErr)
			break wait
		case <-tick:
			if st := srv.Stats(); st != last {
				logStats(log, "ingest stats", st)
				last = st
			}
		}
	}
	drain, cancel := context.WithTimeout(context.Background(), cfg.Ingest.DrainTimeout)
	defer cancel()
	shutErr := srv.Shutdown(drain)
	if err := os.Remove(cfg.Socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("removing socket", "error", err)
	}
	logStats(log, "ingest stopped", srv.Stats())
	stopFollow()
	<-followed
	start, size := time.Now(), j.Size()
	closeErr := closeJournal()
	log.Info("journal closed", "entries", size, "took", time.Since(start))
	return errors.Join(serveErr, shutErr, closeErr)
}

// followIndex keeps the index at path current with the journal until ctx is
// done, rebuilding it first when its schema is out of date. It logs rather
// than returns its errors: the journal, not the index, is the record.
func followIndex(ctx context.Context, path, jdir string, j *journal.Journal, log hclog.Logger) {
	ix, err := index.Open(path, index.WithLogger(log))
	if errors.Is(err, index.ErrSchema) {
		log.Info("index schema changed, rebuilding", "index", path)
		if err = index.Reindex(ctx, path, jdir, nil, index.WithLogger(log)); err == nil {
			ix, err = index.Open(path, index.WithLogger(log))
		}
	}
	if err != nil {
		log.Error("index not followed", "index", path, "error", err)
		return
	}
	defer ix.Close()
	if err := ix.Follow(ctx, jdir, j); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("index stopped following the journal", "index", path, "error", err)
	}
}

func logStats(log hclog.Logger, msg string, st server.Stats) {
	log.Info(msg, "conns", st.Conns, "batches", st.Batches, "events", st.Events,
		"duplicates", st.Duplicates, "rejected", st.Rejected, "failed", st.Failed,
		"malformed", st.Malformed, "oversized", st.Oversized, "refused", st.Refused,
		"unavailable", st.Unavailable, "busy", st.Busy, "timeouts", st.Timeouts)
}
