package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sandtrail/sandtrail/record/index"
)

func newReindexCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "reindex",
		Short: "Rebuild the index from the journal",
		Long: `reindex rebuilds the index (<data_dir>/index.db) from the journal
(<data_dir>/journal), the source of truth. It builds a new file beside the
old one and renames it into place only when it is complete, so a query
running meanwhile sees the old index or the new one, never half of one.

Run it when the index is lost, damaged or in doubt; query and sessions keep
the index current on their own. On a terminal it shows its progress on
stderr; otherwise it is silent unless it fails.`,
		Example: `  sandtrail reindex
  sandtrail reindex --data /srv/sandtrail`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			log := newLogger(cfg)
			jdir := cfg.JournalDir()
			if fi, err := os.Stat(jdir); err != nil || !fi.IsDir() {
				return fmt.Errorf("no journal at %s: nothing to index (set --data or SANDTRAIL_DATA_DIR)", jdir)
			}
			tty := term.IsTerminal(int(os.Stderr.Fd()))
			var progress func(done, total uint64)
			start := time.Now()
			if tty {
				last := time.Time{}
				progress = func(done, _ uint64) {
					if time.Since(last) < 200*time.Millisecond {
						return
					}
					last = time.Now()
					fmt.Fprintf(os.Stderr, "\rindexed %d entries (%.0f/s)   ", done, float64(done)/time.Since(start).Seconds())
				}
			}
			path := cfg.IndexPath()
			if err := index.Reindex(cmd.Context(), path, jdir, progress, index.WithLogger(log)); err != nil {
				if tty {
					fmt.Fprintln(os.Stderr)
				}
				return err
			}
			if tty {
				ix, err := index.Open(path, index.WithLogger(log))
				if err != nil {
					return err
				}
				st, err := ix.Stats(cmd.Context())
				ix.Close()
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "\rindexed %d events of %d sessions (%d skipped) into %s in %s\n",
					st.Events, st.Sessions, st.Skipped, path, time.Since(start).Round(time.Millisecond))
			}
			return nil
		},
	}
}
