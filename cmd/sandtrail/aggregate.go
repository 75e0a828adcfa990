package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/record/aggregate"
	"github.com/sandtrail/sandtrail/record/central"
	"github.com/sandtrail/sandtrail/record/render"
)

func newAggregateCmd(g *globals) *cobra.Command {
	var cfg aggregate.Config
	var dsn, keysDir string
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "aggregate --nats URL --postgres DSN --keys DIR",
		Short: "Move many hosts' records from NATS JetStream into a central PostgreSQL store, verifying each host's chain",
		Long: `aggregate reads the stream that the hosts' nats sinks publish (subjects
sandtrail.<host>.<kind>, docs/sinks.md) through a durable pull consumer, writes
every entry into the central store in PostgreSQL (migrating its schema first),
and verifies each host's Merkle chain against the host's signed checkpoints as
they arrive. Read the store with --store on query, sessions, timeline,
packages, alerts, report and export.

Run more instances with the same --consumer to scale out: each message goes to
one of them, and writes are idempotent on (host, seq). A killed aggregator
loses nothing; what it had not acknowledged is delivered again.

--keys is a directory of <host>.pub files, each the journal verifier key of one
host (its data directory's keys/*.pub), named as the host publishes (its host
id, dots as underscores). An integrity alert (rule integrity, level critical)
is raised for entries of a host with no key, a checkpoint by another key or
with a bad signature, an entry delivered again with other bytes (a fork),
entries that do not hash to their signed checkpoint, and entries a checkpoint
covers that have not arrived within --gap-grace.

PostgreSQL's own variables (PGPASSWORD, PGPASSFILE, PGSSLMODE) apply.
docs/deployment.md has the topology, sizing and recovery.`,
		Example: `  sandtrail aggregate --nats nats://n1:4222,nats://n2:4222,nats://n3:4222 \
    --postgres postgres://sandtrail@db/sandtrail --keys /etc/sandtrail/hosts
  sandtrail aggregate status --postgres postgres://reader@db/sandtrail`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.URL == "" || dsn == "" || keysDir == "" {
				return usageErr(fmt.Errorf("aggregate needs --nats, --postgres and --keys"))
			}
			if grace <= cfg.AckWait {
				// What a killed aggregator fetched comes again only after
				// the ack wait: a shorter grace raises gaps that are not.
				return usageErr(fmt.Errorf("--gap-grace %s must be longer than --ack-wait %s", grace, cfg.AckWait))
			}
			c, err := g.load()
			if err != nil {
				return usageErr(err)
			}
			return runAggregate(cmd.Context(), c, cfg, dsn, keysDir, grace)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "nats", "", "NATS server URL, or several comma-separated")
	f.StringVar(&dsn, "postgres", "", "the central store: postgres://USER@HOST[:PORT]/DB")
	f.StringVar(&keysDir, "keys", "", "directory of <host>.pub journal verifier keys")
	f.StringVar(&cfg.CredsFile, "nats-creds", "", "the aggregator's NATS credentials (.creds file)")
	f.StringVar(&cfg.CAFile, "nats-ca", "", "the CA of a tls:// NATS server")
	f.StringVar(&cfg.Stream, "stream", "SANDTRAIL", "the hosts' JetStream stream")
	f.StringVar(&cfg.Consumer, "consumer", "sandtrail-aggregate", "the durable consumer that the instances share")
	f.IntVar(&cfg.Batch, "batch", 4000, "messages fetched and written at a time")
	f.DurationVar(&cfg.VerifyEvery, "verify-every", 10*time.Second, "how often every host's chain is verified again")
	f.DurationVar(&cfg.AckWait, "ack-wait", time.Minute, "how long JetStream waits for an aggregator's acknowledgement before it delivers a message again")
	f.DurationVar(&grace, "gap-grace", 2*time.Minute, "how long entries under a signed checkpoint may be missing before a gap is raised (more than --ack-wait)")
	cmd.AddCommand(newAggregateStatusCmd())
	return cmd
}

func runAggregate(ctx context.Context, c *Config, cfg aggregate.Config, dsn, keysDir string, grace time.Duration) error {
	log := newLogger(c)
	keys, err := central.LoadKeys(keysDir)
	if err != nil {
		return usageErr(err)
	}
	store, err := central.Open(ctx, dsn, central.WithKeys(keys), central.WithGapGrace(grace), central.WithLogger(log))
	if err != nil {
		return err
	}
	defer store.Close()
	a, err := aggregate.New(ctx, cfg, store, log)
	if err != nil {
		return err
	}
	defer a.Close()
	log.Info("aggregating", "nats", cfg.URL, "stream", cfg.Stream, "consumer", cfg.Consumer, "hosts", len(keys))
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				st := a.Status()
				log.Info("aggregated", "messages", st.Messages, "added", st.Added, "duplicates", st.Duplicates,
					"checkpoints", st.Checkpoints, "unreadable", st.Unreadable, "redelivered", st.Redelivered, "pending", st.Pending, "last_error", st.LastError)
			}
		}
	}()
	err = a.Run(ctx)
	close(done)
	st := a.Status()
	log.Info("stopped", "messages", st.Messages, "added", st.Added, "duplicates", st.Duplicates)
	return err
}

func newAggregateStatusCmd() *cobra.Command {
	var dsn, format, keysDir string
	cmd := &cobra.Command{
		Use:   "status --postgres DSN [--keys DIR] [--format table|json]",
		Short: "Show how far each host's chain is verified in the central store",
		Long: `status reads the central store (read-only, so an investigator's role will do)
and prints, for each host: the entries received, how many are folded into its
Merkle tree, the size of the newest signed checkpoint they matched and when,
whether the verification waits on missing entries, and why it stopped, if it
did. With --keys, a host without a key there is marked unknown.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json"); err != nil {
				return err
			}
			if !central.IsDSN(dsn) {
				return usageErr(fmt.Errorf("--postgres %q: want a postgres:// URL", dsn))
			}
			opts := []central.Option{central.ReadOnly()}
			if keysDir != "" {
				keys, err := central.LoadKeys(keysDir)
				if err != nil {
					return usageErr(err)
				}
				opts = append(opts, central.WithKeys(keys))
			}
			store, err := central.Open(cmd.Context(), dsn, opts...)
			if err != nil {
				return err
			}
			defer store.Close()
			chains, err := store.Chains(cmd.Context())
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), chains)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "HOST\tKEY\tRECEIVED\tFOLDED\tVERIFIED\tVERIFIED AT\tSTALLED SINCE\tBROKEN")
			for _, c := range chains {
				at, stalled := "-", "-"
				if !c.VerifiedAt.IsZero() {
					at = c.VerifiedAt.Format(time.RFC3339)
				}
				if !c.StalledSince.IsZero() {
					stalled = c.StalledSince.Format(time.RFC3339)
				}
				key := "-"
				switch {
				case keysDir != "" && c.Known:
					key = "known"
				case keysDir != "":
					key = "unknown"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", render.Clean(c.Host, 40), key, c.Received, c.Next, c.Verified, at, stalled,
					render.OrDash(render.Clean(c.Broken, 100)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&dsn, "postgres", "", "the central store: postgres://USER@HOST[:PORT]/DB")
	cmd.Flags().StringVar(&keysDir, "keys", "", "directory of <host>.pub keys, to mark the hosts without one")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}
