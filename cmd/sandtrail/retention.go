package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/daemon"
	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/render"
)

func newRetentionCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retention",
		Short: "Prune what ended sessions did past the hot window, from the index and the journal",
		Long: `retention applies the retention policy (config retention.hot_days, default
90; docs/retention.md). Sessions that ended (session.terminate or
session.cleanup) and whose last event is more than hot_days old, and entries of
no session older than that, are pruned: their rows are deleted from the index,
and their journal entries replaced with tombstones that keep each entry's seq
and Merkle leaf hash, so sandtrail verify still checks the whole tree against
every signed checkpoint. A session under a legal hold (sandtrail hold) is never
pruned. Each prune is journaled as a retention.prune event.

The running daemon applies the policy every retention.interval (default 24h)
on its own.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newRetentionApplyCmd(g))
	return cmd
}

func newRetentionApplyCmd(g *globals) *cobra.Command {
	var (
		dryRun bool
		format string
	)
	cmd := &cobra.Command{
		Use:   "apply [--dry-run] [--format table|json]",
		Short: "Apply the retention policy now (--dry-run: only list what would go)",
		Long: `apply prunes now what the retention policy says is past the hot window, and
prints what it pruned: each session with its entries and seq ranges, the
entries of no session, and the sessions a legal hold kept. --dry-run lists the
same without changing anything.

When a daemon runs, apply asks it over the control socket (root only): the
daemon is the journal's one writer. Otherwise apply opens the journal itself,
which needs root and the signing key (the journal's lock keeps any other
writer out meanwhile).`,
		Example: `  sandtrail retention apply --dry-run
  sandtrail retention apply --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			req := &control.Request{Op: control.OpRetention, DryRun: dryRun}
			resp, err := retentionCall(cmd.Context(), g, req, func(ctx context.Context, r *daemon.Retention, uid uint32) (*control.Response, error) {
				rep, err := r.Apply(ctx, dryRun, uid)
				return &control.Response{OK: true, Retention: rep}, err
			})
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), resp.Retention)
			}
			return writeRetention(cmd.OutOrStdout(), resp.Retention)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be pruned, change nothing")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

// retentionDirect is what a retention or hold command does when no daemon
// runs, on a Retention over the journal it opened itself, for uid.
type retentionDirect func(ctx context.Context, r *daemon.Retention, uid uint32) (*control.Response, error)

// retentionCall sends req to the running daemon, or, when none runs, opens
// the journal and the index itself and runs direct on them.
func retentionCall(ctx context.Context, g *globals, req *control.Request, direct retentionDirect) (*control.Response, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, usageErr(err)
	}
	resp, err := control.Call(cfg.ControlSocket(), req)
	if !errors.Is(err, control.ErrNoDaemon) {
		return resp, err
	}
	if os.Geteuid() != 0 {
		return nil, usageErr(fmt.Errorf("%s: no daemon runs, and opening the journal needs root (its writer holds the signing key)", req.Op))
	}
	log := newLogger(cfg)
	r, closeAll, err := openRetention(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	resp, err = direct(ctx, r, uint32(os.Getuid()))
	if cerr := closeAll(); err == nil {
		err = cerr
	}
	return resp, err
}

// openRetention opens cfg's journal (as its one writer) and its index,
// caught up, and the retention policy over them; closeAll closes both, the
// journal signing its final checkpoint.
func openRetention(ctx context.Context, cfg *Config, log hclog.Logger) (r *daemon.Retention, closeAll func() error, err error) {
	j, err := daemon.OpenJournal(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	ix, err := index.OpenCurrent(ctx, cfg.IndexPath(), cfg.JournalDir(), index.WithLogger(log))
	if err != nil {
		return nil, nil, errors.Join(err, j.Close())
	}
	cold, err := cfg.ColdTier(ix)
	if err != nil {
		return nil, nil, errors.Join(err, ix.Close(), j.Close())
	}
	r = &daemon.Retention{Journal: j, Index: ix, HotDays: cfg.Retention.HotDays, Host: cfg.Host, Archive: cold,
		Unsent: cfg.SinkCursors(), Log: log}
	return r, func() error { return errors.Join(ix.Close(), j.Close()) }, nil
}

// writeRetention prints a retention report as tables.
func writeRetention(w io.Writer, rep *control.RetentionReport) error {
	verb := "pruned"
	if rep.DryRun {
		verb = "would prune (dry run: nothing changed)"
	}
	fmt.Fprintf(w, "hot window %d days: sessions that ended before %s\n", rep.HotDays, rep.Cutoff.Format(time.RFC3339))
	fmt.Fprintf(w, "%s %d entries: %d sessions, %d entries of no session", verb, rep.Entries, len(rep.Sessions), rep.Sessionless)
	if rep.Sessionless > 0 {
		fmt.Fprintf(w, " (seqs %s)", rangesText(rep.SessionlessRanges))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(rep.Sessions) > 0 {
		fmt.Fprintln(tw, "\nSESSION\tENTRIES\tSEQS\tLAST EVENT\tEND")
		for _, s := range rep.Sessions {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", render.Clean(s.ID, 64), s.Entries, rangesText(s.Ranges),
				s.LastTS.Format(time.RFC3339), render.OrDash(render.Clean(s.EndReason, 32)))
		}
	}
	if len(rep.Held) > 0 {
		fmt.Fprintln(tw, "\nHELD (legal hold; not pruned)\tENTRIES\tSINCE\tBY\tREASON")
		for _, s := range rep.Held {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", render.Clean(s.ID, 64), s.Entries, s.Hold.Since.Format(time.RFC3339),
				render.OrDash(render.Clean(s.Hold.Actor, 40)), render.Clean(s.Hold.Reason, 80))
		}
	}
	if len(rep.Failed) > 0 {
		fmt.Fprintln(tw, "\nNOT ARCHIVED (not pruned; tried again next run)\tENTRIES\tERROR")
		for _, s := range rep.Failed {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", render.Clean(s.ID, 64), s.Entries, render.Clean(s.Error, 120))
		}
	}
	if len(rep.Unsent) > 0 || rep.UnsentSessionless > 0 {
		fmt.Fprintf(tw, "\nNOT YET SENT BY EVERY SINK (not pruned; %d entries of no session too)\tENTRIES\tSEQS\n", rep.UnsentSessionless)
		for _, s := range rep.Unsent {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", render.Clean(s.ID, 64), s.Entries, rangesText(s.Ranges))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if j := rep.Journal; j != nil {
		_, err := fmt.Fprintf(w, "\njournal: %d entries replaced with tombstones in %d segments (covered by the checkpoint of %d); index: %d rows deleted; recorded as retention.prune %s\n",
			j.Pruned, j.Segments, j.Checkpoint, rep.Forgotten, seqsText(rep.Events))
		return err
	}
	return nil
}

// rangesText writes seq ranges briefly: "seqs 3-9, 12 (2 runs)".
func rangesText(rs []event.SeqRange) string {
	if len(rs) == 0 {
		return "-"
	}
	var parts []string
	for i, r := range rs {
		if i == 4 {
			parts = append(parts, "…")
			break
		}
		if r.First == r.Last {
			parts = append(parts, fmt.Sprint(r.First))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r.First, r.Last))
		}
	}
	s := strings.Join(parts, ", ")
	if len(rs) > 1 {
		s += fmt.Sprintf(" (%d runs)", len(rs))
	}
	return s
}

func seqsText(seqs []uint64) string {
	var parts []string
	for _, s := range seqs {
		parts = append(parts, fmt.Sprintf("seq %d", s))
	}
	return render.OrDash(strings.Join(parts, ", "))
}
