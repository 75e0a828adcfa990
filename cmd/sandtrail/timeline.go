package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/record/timeline"
)

func newTimelineCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "timeline SESSION [--format text|json]",
		Short: "Print a session's process tree and its lifecycle and limit events",
		Long: `timeline reads one session's events from the index (caught up with the
journal first) and prints:

  - the process tree: every process the kernel collector saw, its children
    indented beneath it, with its argv (masked as recorded), cwd, uid, exit
    code or signal, and how long it ran;
  - the session's lifecycle (create, start, pause, resume, terminate,
    cleanup), its limit hits, losses and alerts, in order;
  - its packages, one line each, joined as sandtrail packages joins them
    (the shim's claim with what the mirror served; packages --session S
    shows what their install scripts did).

A process whose fork or exit was not recorded (it started before the
session's cgroup was watched, or a loss) is still shown, under its parent
when the parent is known.`,
		Example: `  sandtrail timeline 01jd2k3m4n5p6q7r
  sandtrail timeline 01jd2k3m4n5p6q7r --format json | jq '.processes'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			id, err := query.ParseSession(args[0])
			if err != nil {
				return usageErr(err)
			}
			cfg, ix, err := g.loadIndex(cmd.Context())
			if err != nil {
				return err
			}
			defer ix.Close()
			tl, err := buildTimeline(cmd.Context(), ix, id, cfg.ShimDir)
			if err != nil {
				return err
			}
			if tl.Events == 0 {
				return usageErr(fmt.Errorf("no events recorded for session %q", id))
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), tl)
			}
			writeTimeline(cmd.OutOrStdout(), tl)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

// buildTimeline reads the session's events from the index; its packages
// are joined with the shims of shimDir, as sandtrail packages joins them.
func buildTimeline(ctx context.Context, ix *index.Index, id, shimDir string) (*timeline.Timeline, error) {
	b := timeline.New(id, viewOptions(shimDir)...)
	err := ix.EachEvent(ctx, query.Filter{Session: id}, func(e *event.Event) error {
		b.Add(e.Seq, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading session %s: %w", id, err)
	}
	return b.Timeline(), nil
}

// writeTimeline prints tl as text.
func writeTimeline(w io.Writer, tl *timeline.Timeline) {
	lost := ""
	if tl.Lost > 0 {
		lost = fmt.Sprintf(", %d lost (see the collector.loss steps)", tl.Lost)
	}
	fmt.Fprintf(w, "session %s: %d events%s\n\nprocesses\n", tl.SessionID, tl.Events, lost)
	if len(tl.Processes) == 0 {
		fmt.Fprintln(w, "  (none recorded)")
	}
	for _, p := range tl.Processes {
		writeProc(w, p, 1)
	}
	fmt.Fprintln(w, "\nlifecycle and limits")
	if len(tl.Steps) == 0 {
		fmt.Fprintln(w, "  (none recorded)")
	}
	for _, s := range tl.Steps {
		fmt.Fprintf(w, "  %s  %-18s %s\n", s.TS.Local().Format("15:04:05.000"), s.Kind, s.Detail)
	}
	if len(tl.Packages) > 0 {
		fmt.Fprintln(w, "\npackages (sandtrail packages --session "+tl.SessionID+" for the scripts' files and connections)")
		for _, p := range tl.Packages {
			fmt.Fprintf(w, "  %s\n", render.Clean(fmt.Sprintf("%s %s %s  %s%s", p.Ecosystem, p.Name, p.Version, p.Seen, scriptNote(p)), 200))
		}
	}
}

func writeProc(w io.Writer, p *timeline.Proc, depth int) {
	ind := strings.Repeat("  ", depth)
	cmd := render.ShellJoin(p.Argv, 160)
	if cmd == "" {
		cmd = "[" + render.Clean(p.Comm, 32) + "]"
	}
	if p.Truncated {
		cmd += " …(argv truncated)"
	}
	var attrs []string
	if p.Cwd != "" {
		attrs = append(attrs, "cwd="+render.Clean(p.Cwd, 80))
	}
	if p.UID != nil {
		attrs = append(attrs, fmt.Sprintf("uid=%d", *p.UID))
	}
	switch {
	case p.Signal != 0:
		attrs = append(attrs, fmt.Sprintf("killed by signal %d", p.Signal))
	case p.ExitCode != nil:
		attrs = append(attrs, fmt.Sprintf("exit %d", *p.ExitCode))
	case !p.Exited:
		attrs = append(attrs, "no exit recorded")
	}
	if d, ok := p.Duration(); ok {
		attrs = append(attrs, d.Round(time.Microsecond).String())
	}
	for _, f := range p.Failed {
		attrs = append(attrs, "exec failed: "+f)
	}
	start := "            "
	if !p.Start.IsZero() {
		start = p.Start.Local().Format("15:04:05.000")
	}
	fmt.Fprintf(w, "%s %s%d %s  %s\n", start, ind, p.Pid, cmd, strings.Join(attrs, "  "))
	for _, c := range p.Children {
		writeProc(w, c, depth+1)
	}
}

// scriptNote says how many script processes a package started.
func scriptNote(p *pkgview.Package) string {
	if len(p.Processes) == 0 {
		return ""
	}
	return fmt.Sprintf("  (%d install-script processes)", len(p.Processes))
}
