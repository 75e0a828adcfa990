package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/record/query"
)

func newExportCmd(g *globals) *cobra.Command {
	var format, out string
	var args *query.Args
	cmd := &cobra.Command{
		Use:   "export [filters] [--format ocsf|jsonl] [--out FILE]",
		Short: "Write the recorded events for a SIEM: OCSF 1.8.0 or the stored JSON lines",
		Long: `export writes the events that match every filter given, in time order, one a
line: as OCSF 1.8.0 events (--format ocsf, the default; docs/ocsf.md), or byte
for byte as the journal stores them (--format jsonl). Each OCSF event carries
the session in metadata.correlation_uid and the journal's seq in
metadata.sequence, the key to dedupe and to prove it (sandtrail prove SEQ).
For a stream as events are journaled, configure a sink (docs/sinks.md).

` + filterHelp,
		Example: `  sandtrail export --since 24h > last-day.ocsf.jsonl
  sandtrail export --session sess-42 --format jsonl --out sess-42.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "ocsf", "jsonl"); err != nil {
				return err
			}
			f, err := query.Parse(*args, time.Now())
			if err != nil {
				return usageErr(err)
			}
			_, ix, err := g.loadStore(cmd.Context())
			if err != nil {
				return err
			}
			defer ix.Close()
			w := cmd.OutOrStdout()
			if out != "" {
				file, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
				if err != nil {
					return usageErr(fmt.Errorf("export: %w", err))
				}
				defer file.Close()
				w = file
			}
			return printEvents(cmd.Context(), w, ix.Reader, f, format)
		},
	}
	args = filterFlags(cmd)
	cmd.Flags().StringVar(&format, "format", "ocsf", "output format: ocsf or jsonl")
	cmd.Flags().StringVar(&out, "out", "", "write to this file (0600) instead of standard output")
	storeFlag(g, cmd)
	return cmd
}
