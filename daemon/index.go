package daemon

import (
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/ingest/server"
	"github.com/sandtrail/sandtrail/record/journal"
)

// followIndex keeps the index at path current with the journal until ctx is
// done, rebuilding it first when its schema is out of date or it no longer
// matches the journal (index.OpenCurrent). It logs rather than returns its
// errors: the journal, not the index, is the record.
func followIndex(ctx context.Context, path, jdir string, j *journal.Journal, log hclog.Logger) {
	ix, err := index.OpenCurrent(ctx, path, jdir, index.WithLogger(log))
	if err != nil {
		log.Error("index not followed", "index", path, "error", err)
		return
	}
	defer ix.Close()
	if err := ix.Follow(ctx, jdir, j); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("index stopped following the journal", "index", path, "error", err)
	}
}

// LogStats logs the ingest server's counters.
func LogStats(log hclog.Logger, msg string, st server.Stats) {
	log.Info(msg, "conns", st.Conns, "batches", st.Batches, "events", st.Events,
		"duplicates", st.Duplicates, "rejected", st.Rejected, "failed", st.Failed,
		"malformed", st.Malformed, "oversized", st.Oversized, "refused", st.Refused,
		"unavailable", st.Unavailable, "busy", st.Busy, "peer_busy", st.PeerBusy, "timeouts", st.Timeouts)
}
