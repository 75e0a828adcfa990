package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/record/report"
	"github.com/sandtrail/sandtrail/record/timeline"
)

// maxTimelineFiles bounds the lines of the timeline's files section
// beside the sensitive paths; sandtrail report lists them all.
const maxTimelineFiles = 12

// maxTimelineIndent bounds the tree's indent: a process deeper than this
// is drawn at it, its line saying its depth.
const maxTimelineIndent = 24

func newTimelineCmd(g *globals) *cobra.Command {
	var format string
	var all bool
	var depth int
	cmd := &cobra.Command{
		Use:   "timeline SESSION [--all] [--depth N] [--format text|json]",
		Short: "Print a session's process tree, its lifecycle and limit events, files and packages",
		Long: `timeline reads one session's events from the index (caught up with the
journal first) and prints:

  - the process tree, drawn with box-drawing characters: every process the
    kernel collector saw, with its argv (masked as recorded), exit code or
    signal, and how long it ran; its cwd and uid where they differ from its
    parent's; install-script processes marked with their package;
  - the session's lifecycle (create, start, pause, resume, terminate,
    cleanup), its limit hits, losses and alerts, in order;
  - the files it touched, sensitive ones first (at most 12 lines; sandtrail report
    lists them all);
  - its packages, one line each, joined as sandtrail packages joins them.

--depth N draws the tree N levels deep and counts the processes beneath.

Package-manager noise is hidden unless --all: file events beneath the
managers' caches and logs (~/.npm/_cacache, ~/.cache/pip, ...), and the
failed execs of a PATH search (ENOENT, then the command was found). Each
hidden kind is counted. Colour is used only when stdout is a terminal and
NO_COLOR is unset.

A process whose fork or exit was not recorded (it started before the
session's cgroup was watched, or a loss) is still shown, under its parent
when the parent is known.

` + storeHelp + ``,
		Example: `  sandtrail timeline 01jd2k3m4n5p6q7r
  sandtrail timeline 01jd2k3m4n5p6q7r --all | less -R
  sandtrail timeline 01jd2k3m4n5p6q7r --format json | jq '.processes'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, "text", "json"); err != nil {
				return err
			}
			if depth < 0 {
				return usageErr(fmt.Errorf("--depth %d: want 0 (no limit) or more", depth))
			}
			id, err := query.ParseSession(args[0])
			if err != nil {
				return usageErr(err)
			}
			cfg, ix, err := g.loadStore(cmd.Context())
			if err != nil {
				return err
			}
			defer ix.Close()
			r, _, err := sessionReport(cmd.Context(), ix.Reader, id, cfg.ShimDir, all)
			if err != nil {
				return err
			}
			if r.Facts.Events == 0 {
				return usageErr(fmt.Errorf("no events recorded for session %q", id))
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), r.Timeline)
			}
			out := cmd.OutOrStdout()
			writeTimeline(out, r, timelineStyle{all: all, depth: depth, colour: colourful(out)})
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.Flags().BoolVar(&all, "all", false, "show package-manager noise too (cache files, PATH-search execs)")
	cmd.Flags().IntVar(&depth, "depth", 0, "draw the process tree this many levels deep (0: all)")
	storeFlag(g, cmd)
	return cmd
}

// colourful reports whether w is a terminal that may have colour.
func colourful(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && os.Getenv("NO_COLOR") == "" && term.IsTerminal(int(f.Fd()))
}

// timelineStyle is how the text is drawn.
type timelineStyle struct {
	all, colour bool
	// depth is how many levels of the tree are drawn; 0 is all.
	depth int
	// pathMisses counts the PATH-search execs left out.
	pathMisses int
}

// The SGR sequences of the timeline's colours.
const (
	sgrRed    = "\x1b[31m"
	sgrYellow = "\x1b[33m"
	sgrDim    = "\x1b[2m"
	sgrBold   = "\x1b[1m"
	sgrOff    = "\x1b[0m"
)

// paint wraps s in sgr when colour is on.
func (st *timelineStyle) paint(sgr, s string) string {
	if !st.colour || s == "" {
		return s
	}
	return sgr + s + sgrOff
}

// writeTimeline prints r's timeline as text.
func writeTimeline(w io.Writer, r *report.Report, st timelineStyle) {
	tl := r.Timeline
	lost := ""
	if tl.Lost > 0 {
		lost = st.paint(sgrRed, fmt.Sprintf(", %d lost (see the collector.loss steps)", tl.Lost))
	}
	fmt.Fprintf(w, "session %s: %d events%s\n\n%s\n", render.Clean(tl.SessionID, 64), tl.Events, lost, st.paint(sgrBold, "processes"))
	if len(tl.Processes) == 0 {
		fmt.Fprintln(w, "  (none recorded)")
	}
	for _, p := range tl.Processes {
		writeProc(w, r, p, nil, "", "", 1, &st)
	}
	fmt.Fprintln(w, "\n"+st.paint(sgrBold, "lifecycle and limits"))
	if len(tl.Steps) == 0 {
		fmt.Fprintln(w, "  (none recorded)")
	}
	for _, s := range tl.Steps {
		line := fmt.Sprintf("  %s  %-18s %s", s.TS.Local().Format("15:04:05.000"), s.Kind, s.Detail)
		if s.Kind == event.KindAlert || s.Kind == event.KindLimitHit || s.Kind == event.KindLoss {
			line = st.paint(sgrRed, line)
		}
		fmt.Fprintln(w, line)
	}
	writeTimelineFiles(w, r, &st)
	if len(tl.Packages) > 0 {
		fmt.Fprintln(w, "\n"+st.paint(sgrBold, "packages")+" (sandtrail packages --session "+render.Clean(tl.SessionID, 64)+" for the scripts' files and connections)")
		for _, p := range tl.Packages {
			fmt.Fprintf(w, "  %s\n", render.Clean(fmt.Sprintf("%s %s %s  %s%s", p.Ecosystem, p.Name, p.Version, p.Seen, scriptNote(p)), 200))
		}
	}
	if hidden := hiddenNote(r, &st); hidden != "" {
		fmt.Fprintln(w, "\n"+st.paint(sgrDim, hidden))
	}
}

// writeTimelineFiles prints the paths the session touched
// (report.Files.Lines): every sensitive one, then at most
// maxTimelineFiles lines of the others.
func writeTimelineFiles(w io.Writer, r *report.Report, st *timelineStyle) {
	if len(r.Files.Paths) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s (%d paths)\n", st.paint(sgrBold, "files"), len(r.Files.Paths))
	lines, more := r.Files.Lines(maxTimelineFiles)
	for _, l := range lines {
		text := "  " + render.Clean(l.Text, 200)
		if l.Sensitive {
			text = st.paint(sgrRed, text+"  [sensitive]")
		}
		fmt.Fprintln(w, text)
	}
	if more > 0 {
		fmt.Fprintf(w, "  … %d more lines (sandtrail report %s --html FILE lists every path)\n", more, render.Clean(r.SessionID, 64))
	}
}

// hiddenNote says what the timeline left out, and how to see it.
func hiddenNote(r *report.Report, st *timelineStyle) string {
	var parts []string
	if n := r.Files.Hidden; n > 0 {
		parts = append(parts, fmt.Sprintf("%d file events in package-manager caches", n))
	}
	if st.pathMisses > 0 {
		parts = append(parts, fmt.Sprintf("%d failed execs of PATH searches", st.pathMisses))
	}
	if len(parts) == 0 {
		return ""
	}
	return "not shown: " + strings.Join(parts, ", ") + " (--all shows them)"
}

// writeProc prints p, at level in the tree, and its children beneath
// parent, drawn with lead (the glyphs of its ancestors) and branch (its
// own); below st.depth, it counts them instead.
func writeProc(w io.Writer, r *report.Report, p, parent *timeline.Proc, lead, branch string, level int, st *timelineStyle) {
	start := "            "
	if !p.Start.IsZero() {
		start = p.Start.Local().Format("15:04:05.000")
	}
	line := fmt.Sprintf("%d %s", p.Pid, p.Command(160))
	switch {
	case p.Signal != 0 || p.ExitCode != nil && *p.ExitCode != 0:
		line = st.paint(sgrRed, line)
	case r.Scripts[p.ExecSeq] != "" && p.ExecSeq != 0:
		line = st.paint(sgrYellow, line)
	}
	if pkg := r.Scripts[p.ExecSeq]; pkg != "" && p.ExecSeq != 0 {
		line += st.paint(sgrYellow, "  [install script of "+render.Clean(pkg, 120)+"]")
	}
	if a := procAttrs(p, parent, st); a != "" {
		line += "  " + st.paint(sgrDim, a)
	}
	if level > maxTimelineIndent {
		line = fmt.Sprintf("[depth %d] %s", level, line)
	}
	fmt.Fprintf(w, "%s %s%s%s\n", start, lead, branch, line)
	next := lead
	if level <= maxTimelineIndent {
		switch branch {
		case "├─ ":
			next += "│  "
		case "└─ ":
			next += "   "
		}
	}
	if st.depth > 0 && level >= st.depth && len(p.Children) > 0 {
		fmt.Fprintf(w, "             %s└─ %s\n", next, st.paint(sgrDim, "… "+beneathNote(r, p)+" (--depth)"))
		return
	}
	for i, c := range p.Children {
		b := "├─ "
		if i == len(p.Children)-1 {
			b = "└─ "
		}
		writeProc(w, r, c, p, next, b, level+1, st)
	}
}

// beneathNote counts the processes beneath p, and among them the install
// scripts' and those that failed or were killed.
func beneathNote(r *report.Report, p *timeline.Proc) string {
	var scripts, failed int
	var walk func(ps []*timeline.Proc)
	walk = func(ps []*timeline.Proc) {
		for _, c := range ps {
			if c.ExecSeq != 0 && r.Scripts[c.ExecSeq] != "" {
				scripts++
			}
			if c.Signal != 0 || c.ExitCode != nil && *c.ExitCode != 0 {
				failed++
			}
			walk(c.Children)
		}
	}
	walk(p.Children)
	return fmt.Sprintf("%d more processes beneath (%d install-script processes, %d failed or killed)", p.Descendants(), scripts, failed)
}

// procAttrs are p's attributes for its line (timeline.Proc.Attrs beneath
// parent), counting the PATH-search misses left out.
func procAttrs(p, parent *timeline.Proc, st *timelineStyle) string {
	attrs, misses := p.Attrs(parent, st.all)
	st.pathMisses += misses
	return strings.Join(attrs, "  ")
}

// scriptNote says how many script processes a package started.
func scriptNote(p *pkgview.Package) string {
	if len(p.Processes) == 0 {
		return ""
	}
	return fmt.Sprintf("  (%d install-script processes)", len(p.Processes))
}
