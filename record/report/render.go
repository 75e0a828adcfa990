package report

import (
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/record/timeline"
)

//go:embed report.html
var pageSource string

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"fmtTime":    fmtTime,
	"clock":      func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"limits":     limitsText,
	"categories": categories,
	"add":        func(a, b int) int { return a + b },
	"clip":       render.Clean,
	"first": func(s []uint64) uint64 {
		if len(s) == 0 {
			return 0
		}
		return s[0]
	},
	"hostport": render.HostPort,
	"shell":    func(argv []string) string { return render.ShellJoin(argv, 240) },
	"join":     strings.Join,
}).Parse(pageSource))

// node is a process of the page's tree.
type node struct {
	P        *timeline.Proc
	Cmd      string
	Attrs    string
	Script   string
	Children []node
}

// refRow is an event an alert names, for the page.
type refRow struct {
	Seq uint64
	Ref
}

// WriteHTML writes r as one self-contained HTML page.
func WriteHTML(w io.Writer, r *Report) error {
	var refs []refRow
	for _, s := range slices.Sorted(maps.Keys(r.Refs)) {
		refs = append(refs, refRow{s, r.Refs[s]})
	}
	t := &treeBuilder{r: r}
	data := struct {
		R          *Report
		Line       string
		Chart      Chart
		Tree       []node
		ProcCount  int
		PathMisses int
		Refs       []refRow
	}{R: r, Line: Line(r), Chart: r.Chart(), Tree: t.nodes(r.Processes, nil, 0), Refs: refs}
	data.ProcCount, data.PathMisses = t.count, t.pathMisses
	return page.Execute(w, data)
}

// maxTreeDepth bounds the nesting of the page's tree: the processes
// beneath a node this deep are listed flat under it, each with its depth.
const maxTreeDepth = 48

// treeBuilder builds the page's tree, counting its processes and the
// PATH-search misses it leaves out.
type treeBuilder struct {
	r                 *Report
	count, pathMisses int
}

// nodes is ps, the children of parent at depth, as the page's nodes. A
// node's cwd and uid are shown where they differ from its parent's; a PATH
// search's failed execs are left out unless the report was built WithAll,
// as in the timeline.
func (t *treeBuilder) nodes(ps []*timeline.Proc, parent *timeline.Proc, depth int) []node {
	out := make([]node, 0, len(ps))
	for _, p := range ps {
		nd := t.node(p, parent, "")
		if depth+1 < maxTreeDepth {
			nd.Children = t.nodes(p.Children, p, depth+1)
		} else {
			nd.Children = t.flat(p, depth+1)
		}
		out = append(out, nd)
	}
	return out
}

// flat lists the processes beneath p, at depth and below, as leaves.
func (t *treeBuilder) flat(p *timeline.Proc, depth int) []node {
	type pending struct {
		p, parent *timeline.Proc
		depth     int
	}
	var out []node
	var stack []pending
	push := func(parent *timeline.Proc, depth int) {
		for i := len(parent.Children) - 1; i >= 0; i-- {
			stack = append(stack, pending{parent.Children[i], parent, depth})
		}
	}
	push(p, depth)
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		out = append(out, t.node(s.p, s.parent, fmt.Sprintf("depth %d", s.depth)))
		push(s.p, s.depth+1)
	}
	return out
}

// node is p's node without its children; note goes first in its
// attributes.
func (t *treeBuilder) node(p, parent *timeline.Proc, note string) node {
	attrs, misses := p.Attrs(parent, t.r.all)
	if note != "" {
		attrs = append([]string{note}, attrs...)
	}
	t.count++
	t.pathMisses += misses
	nd := node{P: p, Cmd: p.Command(240), Attrs: strings.Join(attrs, "  ")}
	if p.ExecSeq != 0 {
		nd.Script = t.r.Scripts[p.ExecSeq]
	}
	return nd
}

// Line is the report in one line, for a CI log: the session, how it ended,
// its counts, its alerts by level, and the journal's status.
func Line(r *Report) string {
	f := r.Facts
	var b strings.Builder
	fmt.Fprintf(&b, "sandtrail: session %s", render.Clean(r.SessionID, 64))
	if f.Reason != "" {
		fmt.Fprintf(&b, " %s", render.Clean(f.Reason, 32))
	}
	if f.ExitStatus != nil {
		fmt.Fprintf(&b, " exit=%d", *f.ExitStatus)
	}
	if d := f.Duration(); d > 0 {
		fmt.Fprintf(&b, " %s", d.Round(time.Millisecond))
	}
	blocked := 0
	for _, p := range r.Packages {
		if p.Outcome != "" && p.Outcome != "served" || p.Seen == "blocked" {
			blocked++
		}
	}
	procs := len(r.Processes)
	for _, p := range r.Processes {
		procs += p.Descendants()
	}
	fmt.Fprintf(&b, ": %d events, %d processes, %d packages (%d refused), %d destinations (%d blocked), %d names blocked, %d tool calls",
		f.Events, procs, len(r.Packages), blocked, len(r.Network.Destinations)+r.Omitted["destinations"],
		r.Network.BlockedDestinations(), r.Network.BlockedNames, f.ByCategory["tool"]+f.ByCategory["model"])
	fmt.Fprintf(&b, "; alerts %s; journal %s", alertCounts(r.Alerts), render.OrDash(r.Journal.Status))
	if f.Lost > 0 {
		fmt.Fprintf(&b, "; %d events lost", f.Lost)
	}
	return b.String()
}

// alertCounts is "none", or the alerts counted by level, highest first.
func alertCounts(as []Alert) string {
	if len(as) == 0 {
		return "none"
	}
	by := map[string]int{}
	for _, a := range as {
		by[a.Level]++
	}
	var parts []string
	for _, l := range slices.Backward(event.AlertLevels) {
		if by[l] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", by[l], l))
			delete(by, l)
		}
	}
	for _, l := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%d %s", by[l], render.Clean(l, 16)))
	}
	return strings.Join(parts, ", ")
}

// fmtTime is t in UTC to the millisecond, or "-" when unknown.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// limitsText is a session's limits for people.
func limitsText(l *event.Limits) string {
	var parts []string
	if l.MemoryBytes > 0 {
		parts = append(parts, fmt.Sprintf("memory %d MiB", l.MemoryBytes>>20))
	}
	if l.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("cpus %g", l.CPUs))
	}
	if l.Pids > 0 {
		parts = append(parts, fmt.Sprintf("pids %d", l.Pids))
	}
	if l.TimeoutMS > 0 {
		parts = append(parts, "timeout "+(time.Duration(l.TimeoutMS)*time.Millisecond).String())
	}
	if l.DiskBytes > 0 {
		parts = append(parts, fmt.Sprintf("disk %d MiB", l.DiskBytes>>20))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// categories is the counts by category, largest first.
func categories(by map[string]uint64) string {
	ks := slices.Sorted(maps.Keys(by))
	slices.SortStableFunc(ks, func(a, b string) int { return cmp.Compare(by[b], by[a]) })
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s %d", k, by[k])
	}
	return strings.Join(parts, ", ")
}
