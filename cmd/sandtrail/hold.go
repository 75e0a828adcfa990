package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/daemon"
	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/render"
)

func newHoldCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hold",
		Short: "Place, lift and list legal holds: a held session is never pruned",
		Long: `A legal hold keeps a session out of the retention policy's reach (sandtrail
retention; docs/retention.md): while it is held, nothing it recorded is pruned
from the index or the journal, however long ago it ended.

Holds are events of the record itself: hold add journals a retention.hold
event, hold remove a retention.release event, each with the reason and the uid
of the caller (the control socket's peer credentials, never a claim), and the
holds in force are folded from those events. No file beside the journal
decides them, so an agent cannot lift one, and the record says who placed and
lifted each.

Only root may place or lift a hold: through the daemon's control socket (root
only, and never a process inside a session) when a daemon runs, or by opening
the journal itself when none does.`,
		Example: `  sandtrail hold add sess-7f3a --reason "litigation hold, case 2026-114"
  sandtrail hold list
  sandtrail hold remove sess-7f3a --reason "case 2026-114 closed"`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newHoldSetCmd(g, control.OpHold), newHoldSetCmd(g, control.OpRelease), newHoldListCmd(g))
	return cmd
}

// newHoldSetCmd is hold add (op OpHold) or hold remove (OpRelease).
func newHoldSetCmd(g *globals, op string) *cobra.Command {
	var reason, format string
	use, short := "add", "Place a legal hold on a session"
	if op == control.OpRelease {
		use, short = "remove", "Lift the legal hold on a session"
	}
	cmd := &cobra.Command{
		Use:   use + " SESSION --reason TEXT [--format text|json]",
		Short: short,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(fmt.Errorf("hold %s takes one SESSION, got %d arguments", use, len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			if reason == "" {
				return usageErr(fmt.Errorf("hold %s: say why with --reason: the record keeps it", use))
			}
			sess := args[0]
			req := &control.Request{Op: op, Session: sess, Reason: reason}
			resp, err := retentionCall(cmd.Context(), g, req, func(ctx context.Context, r *daemon.Retention, uid uint32) (*control.Response, error) {
				if op == control.OpRelease {
					return &control.Response{OK: true}, r.Release(ctx, sess, reason, uid)
				}
				h, err := r.Hold(ctx, sess, reason, uid)
				if err != nil {
					return nil, err
				}
				return &control.Response{OK: true, Holds: []index.Hold{*h}}, nil
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if format == "json" {
				return writeJSON(out, map[string]any{"op": op, "session": sess, "reason": reason, "holds": resp.Holds})
			}
			if op == control.OpRelease {
				_, err = fmt.Fprintf(out, "released the legal hold on %s\n", render.Clean(sess, 128))
				return err
			}
			h := resp.Holds[0]
			_, err = fmt.Fprintf(out, "held %s (seq %d, by %s): retention will not prune it until hold remove\n",
				render.Clean(h.Session, 128), h.Seq, render.Clean(h.Actor, 40))
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	cmd.Flags().StringVar(&reason, "reason", "", "why (required; journaled with the hold)")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

func newHoldListCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list [--format table|json]",
		Short: "List the legal holds in force",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			hs, err := listHolds(cmd.Context(), g)
			if err != nil {
				return err
			}
			if hs == nil {
				hs = []index.Hold{}
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), hs)
			}
			return writeHolds(cmd.OutOrStdout(), hs)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

// listHolds asks the running daemon for the holds, or, when none runs,
// reads them from the index (caught up with the journal, as query does):
// listing needs no journal writer.
func listHolds(ctx context.Context, g *globals) ([]index.Hold, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, usageErr(err)
	}
	resp, err := control.Call(cfg.ControlSocket(), &control.Request{Op: control.OpHolds})
	if !errors.Is(err, control.ErrNoDaemon) {
		if err != nil {
			return nil, err
		}
		return resp.Holds, nil
	}
	_, ix, err := g.loadIndex(ctx)
	if err != nil {
		return nil, err
	}
	defer ix.Close()
	return ix.Holds(ctx)
}

func writeHolds(w io.Writer, hs []index.Hold) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSINCE\tBY\tSEQ\tREASON")
	for _, h := range hs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", render.Clean(h.Session, 64), h.Since.Format(time.RFC3339),
			render.OrDash(render.Clean(h.Actor, 40)), h.Seq, render.Clean(h.Reason, 80))
	}
	if len(hs) == 0 {
		fmt.Fprintln(tw, "(no legal holds)")
	}
	return tw.Flush()
}
