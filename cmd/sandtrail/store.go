package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/central"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/timeline"
)

// storeHelp is the part of the read commands' help about --store.
const storeHelp = `--store postgres://USER@HOST/DB reads a central store (sandtrail aggregate,
docs/deployment.md) instead of this data directory's index: the same questions,
the same answers, over every host's sessions; a session's journal status is
then the central chain verification's.`

// recordStore is what the read commands read: this data directory's index,
// caught up with its journal, or a central store (--store).
type recordStore struct {
	*index.Reader
	close func() error
	// journal says how far the record vouches for a session's entries,
	// the first of which is seq first.
	journal func(ctx context.Context, session string, first uint64) timeline.JournalSummary
}

func (s *recordStore) Close() error { return s.close() }

// storeFlag adds --store to a read command. The config key is bound to
// the flag of the command that runs, when it runs: several commands have
// one, and a key has one flag.
func storeFlag(g *globals, cmd *cobra.Command) {
	cmd.Flags().String("store", "", "read a central store (postgres://…) instead of the data directory's index (env SANDTRAIL_STORE)")
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		g.bindFlag("store", c.Flags().Lookup("store"))
		return run(c, args)
	}
}

// loadStore loads g's config and opens the store the read commands read.
// The caller closes it.
func (g *globals) loadStore(ctx context.Context) (*Config, *recordStore, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, nil, err
	}
	if cfg.Store == "" {
		ix, err := openIndex(ctx, cfg, newLogger(cfg))
		if err != nil {
			return nil, nil, err
		}
		return cfg, &recordStore{Reader: &ix.Reader, close: ix.Close, journal: func(_ context.Context, _ string, first uint64) timeline.JournalSummary {
			return timeline.VerifyJournal(cfg.JournalDir(), first, func() (note.Verifiers, error) { return loadVerifiers(cfg, nil) })
		}}, nil
	}
	if !central.IsDSN(cfg.Store) {
		return nil, nil, usageErr(fmt.Errorf("--store %q: want a postgres:// or postgresql:// URL of a central store", cfg.Store))
	}
	cs, err := central.Open(ctx, cfg.Store, central.ReadOnly(), central.WithLogger(newLogger(cfg)))
	if err != nil {
		return nil, nil, err
	}
	return cfg, &recordStore{Reader: cs.Reader, close: cs.Close, journal: func(ctx context.Context, session string, _ uint64) timeline.JournalSummary {
		return centralJournal(ctx, cs, session)
	}}, nil
}

// centralJournal is the central chain verification's account of a
// session, in the journal summary's terms.
func centralJournal(ctx context.Context, cs *central.Store, session string) timeline.JournalSummary {
	sc, err := cs.SessionChain(ctx, session)
	js := timeline.JournalSummary{Dir: "central store, host " + sc.Host, Entries: sc.Entries, Covered: sc.Covered,
		Uncovered: sc.Entries - sc.Covered}
	switch {
	case err != nil:
		js.Status, js.Error = "error", err.Error()
	case sc.Broken != "" || sc.Problems > 0:
		js.Status = string(journal.StatusTampered)
		js.Error = fmt.Sprintf("%d integrity problems raised about host %s (sandtrail alerts --rule integrity --store …)", sc.Problems, sc.Host)
		if sc.Broken != "" {
			js.Error = sc.Broken + "; " + js.Error
		}
	case sc.Covered < sc.Entries:
		js.Status = string(journal.StatusUncovered)
	default:
		js.Status = string(journal.StatusIntact)
	}
	return js
}
