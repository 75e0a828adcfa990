package daemon

import (
	"context"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/tap"
)

// claimsAfterDaemon is the ingest server's Appender: a batch that holds a
// pkg.install is appended once everything the daemon's own producers
// emitted before it arrived is journaled (flush, the queue's Flush), so
// that the mirror's pkg.fetch of an artifact, emitted while the manager
// downloaded it, precedes the shim's pkg.install of it in the journal, as
// it did in time. The queue can be behind (a burst of kernel events)
// while the ingest server appends at once, and the live rules read an
// install journaled before its verified fetch as an unverified_install.
//
// keep applies the policy's tool_io to the tool and model events among
// them (toolIO.keep): at names their summaries go, whatever the sender
// kept.
type claimsAfterDaemon struct {
	flush func(context.Context) error
	app   tap.Appender
	keep  func(e *event.Event, in, out *string) string
}

var _ tap.Appender = claimsAfterDaemon{}

func (c claimsAfterDaemon) Append(ctx context.Context, evs ...*event.Event) error {
	if c.keep != nil {
		for _, e := range evs {
			if e != nil && (e.Tool != nil || e.Model != nil) {
				c.keep(e, nil, nil)
			}
		}
	}
	for _, e := range evs {
		if e != nil && e.Kind == event.KindPkgInstall {
			// Only the order is at stake: a queue that cannot flush (closed,
			// or failing, which it reports itself) does not hold the claim.
			_ = c.flush(ctx)
			break
		}
	}
	return c.app.Append(ctx, evs...)
}
