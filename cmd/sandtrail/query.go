package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/ocsf"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/record/render"
)

// filterHelp is the part of the help that query and sessions share.
const filterHelp = `Filters (all optional; together they must all hold for an event):
  --session ID        one session
  --since T           events at or after T, which is RFC 3339
                      (2026-11-29T08:00:00Z), a date (2026-11-29), or a
                      duration before now (30m, 2h, 7d, 2w)
  --until T           events before T (same forms)
  --kind K[,K...]     event kinds: exact (file.read), a prefix (file. or file.*),
                      or a whole category (pkg)
  --path P            a prefix: the path and everything beneath it (/etc/ssh
                      matches /etc/ssh/sshd_config, not /etc/sshd), or a glob:
                      * and ? stay within one directory, ** crosses them, [a-z]
  --domain D          exact (example.com) or every sub-domain (*.example.com,
                      which matches a.example.com, not example.com nor
                      badexample.com); matches connects and DNS lookups
  --package P         npm:lodash (any version), npm:lodash@4.17.20 (exact),
                      pkg:npm/lodash@4.17.20 (a purl), npm:lodash@^4.17.0 or
                      pypi:requests@>=2,<3 or deb:curl@">= 7.88" (a range);
                      PyPI also as pip takes it, pypi:requests==2.31.0 or
                      pypi:requests>=2,<3 (PEP 440: == != < <= > >= ~= ===)
  --reason R          sessions that ended (session.terminate) with reason R:
                      normal, timeout, oom, api, policy_violation, signal, host_lost
  --pid N             events of process N
  --limit N           at most N results (0: no limit)

The index (<data_dir>/index.db) is caught up with the journal
(<data_dir>/journal) first, so answers are never stale.

` + storeHelp

// filterFlags registers the filter flags and returns where they land.
func filterFlags(cmd *cobra.Command) *query.Args {
	a := &query.Args{}
	f := cmd.Flags()
	f.StringVar(&a.Session, "session", "", "only this session")
	f.StringVar(&a.Since, "since", "", "events at or after this time (RFC 3339, date, or 2h/7d before now)")
	f.StringVar(&a.Until, "until", "", "events before this time (RFC 3339, date, or 2h/7d before now)")
	f.StringVar(&a.Kind, "kind", "", "event kinds, comma-separated; file. or file.* is a prefix")
	f.StringVar(&a.Path, "path", "", "file path prefix, or glob (* ? [..] within a directory, ** across)")
	f.StringVar(&a.Domain, "domain", "", "domain, exact or *.suffix")
	f.StringVar(&a.Package, "package", "", "eco:name[@version|@range] or a purl")
	f.StringVar(&a.Reason, "reason", "", "sessions that ended with this reason")
	f.StringVar(&a.Pid, "pid", "", "process id")
	f.StringVar(&a.Limit, "limit", "", "at most this many results (0: no limit)")
	return a
}

// openIndex opens the index brought up to date with the journal
// (index.OpenCurrent), naming the data directory when there is no journal.
func openIndex(ctx context.Context, cfg *Config, log hclog.Logger) (*index.Index, error) {
	ix, err := index.OpenCurrent(ctx, cfg.IndexPath(), cfg.JournalDir(), index.WithLogger(log))
	if errors.Is(err, index.ErrNoJournal) {
		return nil, fmt.Errorf("no journal at %s: nothing has been recorded with this data directory (set --data or SANDTRAIL_DATA_DIR)", cfg.JournalDir())
	}
	return ix, err
}

func newQueryCmd(g *globals) *cobra.Command {
	var format string
	var args *query.Args
	cmd := &cobra.Command{
		Use:   "query [filters] [--format table|json|jsonl|ocsf]",
		Short: "Print the recorded events that match the filters",
		Long: `query prints the events that match every filter given, in time order.

` + filterHelp + `

Output (--format):
  table   seq, time, session, kind and a one-line summary (default)
  json    one JSON array of the events
  jsonl   one event per line, byte for byte as the journal stores it
  ocsf    one OCSF 1.8.0 event per line (docs/ocsf.md); an event that cannot
          be mapped is left out, and their count is said on stderr`,
		Example: `  # 1. who touched the SSH keys, and how
  sandtrail query --path '/home/*/.ssh/**'
  # 2. every connection and lookup of a sub-domain of evil.example
  sandtrail query --domain '*.evil.example'
  # 3. every install or fetch of a vulnerable lodash
  sandtrail query --package 'npm:lodash@<4.17.21' --kind pkg.install
  # 4. how the sessions that ran out of memory ended
  sandtrail query --reason oom --kind session.terminate
  # 5. what one session did in the last two hours, for a SIEM
  sandtrail query --session sess-42 --since 2h --format jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFiltered(cmd, g, args, format, []string{"table", "json", "jsonl", "ocsf"}, printEvents)
		},
	}
	args = filterFlags(cmd)
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, json or jsonl")
	storeFlag(g, cmd)
	return cmd
}

// runFiltered is query and sessions: it checks the format, parses the
// filter flags, catches the index up with the journal and prints with show.
func runFiltered(cmd *cobra.Command, g *globals, args *query.Args, format string, formats []string,
	show func(context.Context, io.Writer, *index.Reader, query.Filter, string) error) error {
	if err := checkFormat(format, formats...); err != nil {
		return err
	}
	f, err := query.Parse(*args, time.Now())
	if err != nil {
		return err
	}
	_, st, err := g.loadStore(cmd.Context())
	if err != nil {
		return err
	}
	defer st.Close()
	return show(cmd.Context(), cmd.OutOrStdout(), st.Reader, f, format)
}

// printEvents streams the matching events in the format.
func printEvents(ctx context.Context, out io.Writer, ix *index.Reader, f query.Filter, format string) error {
	if format == "ocsf" {
		return printOCSF(ctx, out, ix, f)
	}
	hw := newHitWriter(out, format, "SEQ\tTIME\tSESSION\tKIND\tSUMMARY")
	err := ix.Each(ctx, f, func(h index.Hit) error {
		hw.write(h.Raw, func() string {
			sum := "(undecodable)"
			if ev, err := h.Event(); err == nil {
				sum = render.Summary(ev)
			}
			return fmt.Sprintf("%d\t%s\t%s\t%s\t%s", h.Seq, h.TS.Format("2006-01-02T15:04:05.000Z07:00"),
				render.Clean(h.SessionID, 40), render.Clean(h.Kind, 32), sum)
		})
		return nil
	})
	if err != nil {
		return err
	}
	return hw.close()
}

// printOCSF streams the matching events as OCSF JSON lines, and says on
// stderr how many had no OCSF class.
func printOCSF(ctx context.Context, out io.Writer, ix *index.Reader, f query.Filter) error {
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	prod := ocsf.Sandtrail()
	skipped := 0
	err := ix.EachEvent(ctx, f, func(e *event.Event) error {
		o, ok := ocsf.Map(e, prod)
		if !ok {
			skipped++
			return nil
		}
		return enc.Encode(o)
	})
	if err != nil {
		return err
	}
	if skipped > 0 {
		fmt.Fprintf(os.Stderr, "sandtrail: %d events that have no OCSF form were left out\n", skipped)
	}
	return w.Flush()
}

// hitWriter writes stored events in a format: table (a header, then one
// row each), json (one array of them, as stored) or jsonl (one a line).
type hitWriter struct {
	w      *bufio.Writer
	tw     *tabwriter.Writer
	format string
	n      int
}

func newHitWriter(out io.Writer, format, header string) *hitWriter {
	hw := &hitWriter{w: bufio.NewWriter(out), format: format}
	switch format {
	case "table":
		hw.tw = tabwriter.NewWriter(hw.w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(hw.tw, header)
	case "json":
		hw.w.WriteString("[")
	}
	return hw
}

// write writes one event: raw as stored, or for a table the row that row
// makes (called only then).
func (hw *hitWriter) write(raw []byte, row func() string) {
	switch hw.format {
	case "table":
		fmt.Fprintln(hw.tw, row())
	case "json":
		if hw.n > 0 {
			hw.w.WriteString(",")
		}
		hw.w.WriteString("\n")
		hw.w.Write(raw)
	case "jsonl":
		hw.w.Write(raw)
		hw.w.WriteString("\n")
	}
	hw.n++
}

func (hw *hitWriter) close() error {
	switch hw.format {
	case "table":
		if err := hw.tw.Flush(); err != nil {
			return err
		}
	case "json":
		if hw.n > 0 {
			hw.w.WriteString("\n")
		}
		hw.w.WriteString("]\n")
	}
	return hw.w.Flush()
}
