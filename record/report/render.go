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
	data := struct {
		R         *Report
		Line      string
		Chart     Chart
		Tree      []node
		ProcCount int
		Refs      []refRow
	}{R: r, Line: Line(r), Chart: r.Chart(), Refs: refs}
	data.Tree, data.ProcCount = r.tree(r.Processes, nil)
	return page.Execute(w, data)
}

// tree is ps, the children of parent, as the page's nodes, and how many
// there are. A node's cwd and uid are shown where they differ from its
// parent's; a PATH search's failed execs are left out, as in the
// timeline (the record and the JSON report have them).
func (r *Report) tree(ps []*timeline.Proc, parent *timeline.Proc) ([]node, int) {
	out, n := make([]node, 0, len(ps)), 0
	for _, p := range ps {
		attrs, _ := p.Attrs(parent, false)
		nd := node{P: p, Cmd: p.Command(240), Attrs: strings.Join(attrs, "  ")}
		if p.ExecSeq != 0 {
			nd.Script = r.Scripts[p.ExecSeq]
		}
		var c int
		nd.Children, c = r.tree(p.Children, p)
		out, n = append(out, nd), n+1+c
	}
	return out, n
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
	fmt.Fprintf(&b, ": %d events, %d processes, %d packages (%d refused), %d destinations (%d blocked), %d tool calls",
		f.Events, count(r.Processes), len(r.Packages), blocked, len(r.Network.Destinations), r.Network.Blocked, len(r.Tools))
	fmt.Fprintf(&b, "; alerts %s; journal %s", alertCounts(r.Alerts), render.OrDash(r.Journal.Status))
	if f.Lost > 0 {
		fmt.Fprintf(&b, "; %d events lost", f.Lost)
	}
	return b.String()
}

// count is how many processes the tree ps holds.
func count(ps []*timeline.Proc) int {
	n := len(ps)
	for _, p := range ps {
		n += count(p.Children)
	}
	return n
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

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

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
