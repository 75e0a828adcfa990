package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/policies/rules"
	"github.com/sandtrail/sandtrail/record/atomicfile"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/record/report"
)

// reportOpts are sandtrail report's flags.
type reportOpts struct {
	html, format, failOn string
	all                  bool
}

func newReportCmd(g *globals) *cobra.Command {
	var o reportOpts
	cmd := &cobra.Command{
		Use:   "report SESSION [--html FILE] [--format line|md|json] [--all] [--fail-on LEVEL]",
		Short: "Report what one session did: an HTML page, Markdown for a PR, or a line for CI",
		Long: `report reads one session's events from the index (caught up with the
journal first), verifies the journal from the session's first event, and
reports what the session did:

  - its facts (user, host, limits, how it ended) and the journal's status;
  - its alerts, each linked to the events that raised them;
  - its process tree (argv, uid, cwd, exit, duration), with the processes
    that install scripts started marked with their package;
  - its packages (requested, resolved, source, hash, verdict, the mirror's
    fetch, alerts);
  - a network view (connections by destination with bytes each way, the
    names looked up, what was blocked);
  - the files it touched, sensitive ones first;
  - its tool invocations and model calls, limit hits and losses;
  - a timeline.

--html FILE writes all of it as one self-contained HTML page (no external
asset, no script: open it anywhere, attach it to a ticket). --format picks
what goes to stdout: line (default: one line, for a CI log), md (Markdown
for a pull request comment) or json (the whole report).

File events beneath the package managers' caches and logs (~/.npm/_cacache,
~/.cache/pip, /var/cache/apt, ...) are counted but not listed unless --all.

--fail-on LEVEL exits 8 when the session has an alert at LEVEL or above
(informational, low, medium, high, critical): a CI step fails on it.

` + storeHelp + ``,
		Example: `  sandtrail report 01jd2k3m4n5p6q7r --html session.html
  sandtrail report "$SESSION" --format md >> "$GITHUB_STEP_SUMMARY"
  sandtrail report "$SESSION" --fail-on high`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), g, args[0], cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.html, "html", "", "write the HTML report to this file")
	fl.StringVar(&o.format, "format", "line", "what goes to stdout: line, md or json")
	fl.BoolVar(&o.all, "all", false, "list file events in package-manager caches too")
	fl.StringVar(&o.failOn, "fail-on", "", "exit 8 when an alert is at this level or above")
	storeFlag(g, cmd)
	return cmd
}

func (o *reportOpts) run(ctx context.Context, g *globals, session string, out io.Writer) error {
	if err := checkFormat(o.format, "line", "md", "json"); err != nil {
		return err
	}
	if o.failOn != "" && !slices.Contains(event.AlertLevels, o.failOn) {
		return usageErr(fmt.Errorf("--fail-on %q: want one of %s", o.failOn, strings.Join(event.AlertLevels, ", ")))
	}
	id, err := query.ParseSession(session)
	if err != nil {
		return usageErr(err)
	}
	cfg, st, err := g.loadStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := buildReport(ctx, st, id, cfg, o.all)
	if err != nil {
		return err
	}
	if o.html != "" {
		if err := writeHTMLReport(o.html, r); err != nil {
			return err
		}
	}
	if err := o.write(out, r); err != nil {
		return err
	}
	return o.failed(r)
}

// buildReport reads the session's events (sessionReport), names its
// alerts' rules by the policy's rule set, and verifies the journal from
// its first event.
func buildReport(ctx context.Context, st *recordStore, id string, cfg *Config, all bool) (*report.Report, error) {
	var opts []report.Option
	if set, err := loadRules(cfg.Policy); err == nil {
		opts = append(opts, report.WithRuleNames(func(id string) string {
			if r := set.Find(id); r != nil {
				return r.Name
			}
			return ""
		}))
	}
	r, first, err := sessionReport(ctx, st.Reader, id, cfg.ShimDir, all, opts...)
	if err != nil {
		return nil, err
	}
	if r.Facts.Events == 0 {
		return nil, usageErr(fmt.Errorf("no events recorded for session %q (sandtrail sessions lists them)", id))
	}
	r.Generated = time.Now()
	r.Journal = st.journal(ctx, id, first)
	return r, nil
}

// sessionReport reads the session's events from the index into its report
// (whose Timeline is sandtrail timeline's), its packages joined with the
// shims of shimDir as sandtrail packages joins them; first is the seq of
// its first event.
func sessionReport(ctx context.Context, ix *index.Reader, id, shimDir string, all bool, opts ...report.Option) (r *report.Report, first uint64, err error) {
	opts = append(opts, report.WithView(viewOptions(shimDir)...))
	if all {
		opts = append(opts, report.WithAll())
	}
	b := report.New(id, opts...)
	n := 0
	err = ix.EachEvent(ctx, query.Filter{Session: id}, func(e *event.Event) error {
		if n == 0 {
			first = e.Seq
		}
		n++
		b.Add(e.Seq, e)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("reading session %s: %w", id, err)
	}
	return b.Report(), first, nil
}

// writeHTMLReport writes the page to path, whole or not at all.
func writeHTMLReport(path string, r *report.Report) error {
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, r); err != nil {
		return fmt.Errorf("rendering the HTML report: %w", err)
	}
	// 0600: the page holds what the record keeps of tool I/O.
	if err := atomicfile.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		return usageErr(fmt.Errorf("--html: %w", err))
	}
	abs, _ := filepath.Abs(path)
	fmt.Fprintf(os.Stderr, "sandtrail: wrote the HTML report of session %s to %s\n", r.SessionID, abs)
	return nil
}

func (o *reportOpts) write(out io.Writer, r *report.Report) error {
	switch o.format {
	case "json":
		return writeJSON(out, r)
	case "md":
		return report.WriteMarkdown(out, r)
	}
	_, err := fmt.Fprintln(out, report.Line(r))
	return err
}

// failed is an exit error when --fail-on is met.
func (o *reportOpts) failed(r *report.Report) error {
	if o.failOn == "" {
		return nil
	}
	for _, a := range r.Alerts {
		if rules.AtLeast(a.Level, o.failOn) {
			return &exitError{code: exitAlerted, err: fmt.Errorf("session %s has a %s alert (%s), at or above --fail-on %s", r.SessionID, a.Level, a.RuleID, o.failOn)}
		}
	}
	return nil
}
