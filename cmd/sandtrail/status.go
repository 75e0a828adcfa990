package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/record/render"
)

func newStatusCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "status [--format table|json]",
		Short: "Show the running daemon's sinks: cursor, lag, last error, latency",
		Long: `status asks the running daemon (over its control socket; root only) how its
sinks (docs/sinks.md) stand: each one's cursor (the next seq it sends), its lag
(the entries journaled past the cursor), the entries sent since the daemon
started, the last error of a failing receiver, and the event-to-sink latency
(p50 and p99 over the last 4096 entries, from each event's ts to its batch's
write).

It fails when no daemon runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			cfg, err := g.load()
			if err != nil {
				return usageErr(err)
			}
			resp, err := control.Call(cfg.ControlSocket(), &control.Request{Op: control.OpStatus})
			if errors.Is(err, control.ErrNoDaemon) {
				return usageErr(fmt.Errorf("status: %w", err))
			}
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), resp.Sinks)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SINK\tCURSOR\tLAG\tSENT\tP50\tP99\tLAST ERROR")
			for _, s := range resp.Sinks {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\n", render.Clean(s.Name, 40), s.Cursor, s.Lag, s.Sent,
					s.LatencyP50.Round(time.Millisecond), s.LatencyP99.Round(time.Millisecond), render.OrDash(render.Clean(s.LastError, 120)))
			}
			if len(resp.Sinks) == 0 {
				fmt.Fprintln(tw, "(no sinks configured)")
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}
