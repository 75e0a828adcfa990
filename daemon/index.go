package daemon

import (
	"context"
	"errors"

	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/ingest/server"
)

// followIndex keeps the daemon's index current with the journal until ctx
// is done, rebuilding it first when its schema is out of date or it no
// longer matches the journal (index.OpenCurrent). Once it is open, the
// retention policy over it serves the control socket and, with
// o.Retention, runs on its schedule until ctx is done. It logs rather than
// returns its errors: the journal, not the index, is the record.
func (d *Daemon) followIndex(ctx context.Context, o Options) {
	path, log := d.cfg.IndexPath(), d.log
	ix, err := index.OpenCurrent(ctx, path, d.jdir, index.WithLogger(log))
	if err != nil {
		close(d.ixReady)
		log.Error("index not followed", "index", path, "error", err)
		return
	}
	defer ix.Close()
	cold, err := d.cfg.ColdTier(ix)
	if err != nil {
		close(d.ixReady)
		log.Error("no retention policy: the cold tier could not be opened", "archive", d.cfg.Retention.Archive, "error", err)
		return
	}
	d.ret = &Retention{Journal: d.j, Index: ix, Append: d.app, HotDays: d.cfg.Retention.HotDays, Host: d.cfg.Host,
		Archive: cold, Unsent: d.cfg.SinkCursors(), Log: log}
	close(d.ixReady)
	var scheduled sync.WaitGroup
	if o.Retention && d.cfg.Retention.HotDays > 0 {
		every := d.cfg.Retention.Interval
		if every <= 0 {
			every = 24 * time.Hour
		}
		scheduled.Add(1)
		go func() {
			defer scheduled.Done()
			d.ret.RunRetention(ctx, min(time.Minute, every), every)
		}()
	}
	if err := ix.Follow(ctx, d.jdir, d.j); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("index stopped following the journal", "index", path, "error", err)
	}
	scheduled.Wait() // ctx is done: the schedule ends before the index closes
}

// LogStats logs the ingest server's counters.
func LogStats(log hclog.Logger, msg string, st server.Stats) {
	log.Info(msg, "conns", st.Conns, "batches", st.Batches, "events", st.Events,
		"duplicates", st.Duplicates, "rejected", st.Rejected, "failed", st.Failed,
		"malformed", st.Malformed, "oversized", st.Oversized, "refused", st.Refused,
		"unavailable", st.Unavailable, "busy", st.Busy, "peer_busy", st.PeerBusy, "timeouts", st.Timeouts)
}
