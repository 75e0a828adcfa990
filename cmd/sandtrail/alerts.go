package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/daemon"
	"github.com/sandtrail/sandtrail/policies/rules"
	"github.com/sandtrail/sandtrail/record/central"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/ingest/server"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/record/render"
)

func newAlertsCmd(g *globals) *cobra.Command {
	var format, session, since, until, rule, level, limit string
	cmd := &cobra.Command{
		Use:   "alerts [--session ID] [--since T] [--rule RULE] [--level L] [--format table|json|jsonl]",
		Short: "List the alerts that rules raised",
		Long: `alerts lists the alert events in the record, oldest first: the detection
rules' (Sigma, built-in and the policy's: sandtrail rules list), the package
view's (shim_mirror_mismatch, shim_bypass, unverified_install) and the
ingest socket's (ingest_forged_kind). Each names its rule, its level, a
one-line summary and, in refs, the seqs of the events that raised it:
sandtrail query --session ID shows them, sandtrail prove SEQ proves one.

--rule takes a rule's id or name (download_piped_to_shell); --level keeps the
alerts at that level or above (informational, low, medium, high, critical).

Output (--format):
  table   one line per alert (default)
  json    one JSON array of the alert events
  jsonl   one alert event per line

` + storeHelp + ``,
		Example: `  sandtrail alerts --since 24h
  sandtrail alerts --session sess-42 --level high
  sandtrail alerts --rule download_piped_to_shell --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "table", "json", "jsonl"); err != nil {
				return err
			}
			if level != "" && !slices.Contains(event.AlertLevels, level) {
				return usageErr(fmt.Errorf("--level %q: want one of %s", level, strings.Join(event.AlertLevels, ", ")))
			}
			f, err := query.Parse(query.Args{Session: session, Since: since, Until: until, Kind: "alert", Limit: limit}, time.Now())
			if err != nil {
				return usageErr(err)
			}
			cfg, ix, err := g.loadStore(cmd.Context())
			if err != nil {
				return err
			}
			defer ix.Close()
			set, err := loadRules(cfg.Policy)
			if err != nil {
				return err
			}
			if rule != "" && set.Find(rule) == nil && !slices.Contains(goRules, rule) {
				return usageErr(fmt.Errorf("--rule %q: no rule has this id or name (sandtrail rules list)", rule))
			}
			return printAlerts(cmd.Context(), cmd.OutOrStdout(), ix.Reader, f, set, alertSelect{rule: rule, level: level}, format)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&session, "session", "", "only this session")
	fl.StringVar(&since, "since", "", "alerts at or after this time (RFC 3339, date, or 2h/7d before now)")
	fl.StringVar(&until, "until", "", "alerts before this time")
	fl.StringVar(&rule, "rule", "", "only this rule's alerts (its id or name)")
	fl.StringVar(&level, "level", "", "only alerts at this level or above")
	fl.StringVar(&limit, "limit", "", "at most this many alerts (0: no limit)")
	fl.StringVar(&format, "format", "table", "output format: table, json or jsonl")
	storeFlag(g, cmd)
	return cmd
}

// goRules are the rules written in Go rather than Sigma, whose alerts name
// them by name: the package view's, the ingest socket's and the central
// store's chain verification's.
var goRules = append(slices.Clone(pkgview.Rules), server.RuleForgedKind, central.IntegrityRule)

// loadRules loads the detection rules that the policy file (the embedded
// default when empty) runs.
func loadRules(policyFile string) (*rules.Set, error) {
	pol, err := daemon.LoadPolicy(policyFile)
	if err != nil {
		return nil, err
	}
	return rules.Load(pol.Detections())
}

// alertSelect is what --rule and --level keep.
type alertSelect struct{ rule, level string }

// printAlerts streams the alerts of f that sel keeps, in the format.
func printAlerts(ctx context.Context, out io.Writer, ix *index.Reader, f query.Filter, set *rules.Set, sel alertSelect, format string) error {
	hw := newHitWriter(out, format, "SEQ\tTIME\tSESSION\tLEVEL\tRULE\tSUMMARY")
	err := ix.Each(ctx, f, func(h index.Hit) error {
		ev, err := h.Event()
		if err != nil || ev.Alert == nil {
			return nil
		}
		a := ev.Alert
		if (sel.rule != "" && !set.Selects(sel.rule, a.RuleID)) || (sel.level != "" && !rules.AtLeast(a.Level, sel.level)) {
			return nil
		}
		hw.write(h.Raw, func() string {
			sum := a.Summary
			if sum == "" {
				sum = a.Title
			}
			return fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s", h.Seq, h.TS.Format(time.RFC3339), render.Clean(h.SessionID, 40),
				render.Clean(a.Level, 16), render.Clean(set.Name(a.RuleID), 40), render.Clean(sum, 160))
		})
		return nil
	})
	if err != nil {
		return err
	}
	return hw.close()
}
