package report

import (
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/record/timeline"
)

// The SVG timeline's geometry, in its own units.
const (
	chartWidth   = 960
	chartLabelW  = 220
	chartRowH    = 16
	chartMaxRows = 40
)

// Chart is the SVG timeline laid out: what the template draws.
type Chart struct {
	Width, Height int
	Rows          []ChartRow
	Ticks         []ChartTick
	// More counts the processes left out beyond chartMaxRows.
	More int
}

// ChartRow is one row: a label and its bars or marks.
type ChartRow struct {
	Y     int
	Label string
	Bars  []ChartBar
}

// ChartBar is a bar (a process's run) or a mark (an instant), with its
// tooltip.
type ChartBar struct {
	X, W  float64
	Class string
	Title string
}

// ChartTick is a time on the axis; Anchor is its label's SVG
// text-anchor.
type ChartTick struct {
	X             float64
	Label, Anchor string
}

// spans lists the runs of the first chartMaxRows processes, depth first
// (counting the others in chartMore), then the marks.
func (b *Builder) spans() []Span {
	var out []Span
	var walk func(ps []*timeline.Proc, depth int)
	walk = func(ps []*timeline.Proc, depth int) {
		for _, p := range ps {
			if len(out) >= chartMaxRows {
				b.r.chartMore += 1 + p.Descendants()
				continue
			}
			label := fmt.Sprintf("%*s%d %s", min(depth, chartMaxIndent), "", p.Pid, procName(p))
			cls := "proc"
			if _, ok := b.r.Scripts[p.ExecSeq]; ok && p.ExecSeq != 0 {
				cls = "script"
			}
			out = append(out, Span{Row: label, Start: p.Start, End: p.End, Class: cls})
			walk(p.Children, depth+1)
		}
	}
	walk(b.r.Processes, 0)
	return append(out, b.marks...)
}

// chartMaxIndent bounds a label's indent, however deep its process.
const chartMaxIndent = 12

// procName is a process's name for a label: its argv[0]'s base, else its
// comm.
func procName(p *timeline.Proc) string {
	if len(p.Argv) > 0 {
		if a := path.Base(p.Argv[0]); a != "" && a != "." && a != "/" {
			return render.Clean(a, 24)
		}
	}
	return render.Clean(p.Comm, 24)
}

// Chart lays out the report's spans between the session's first and last
// times as the host and the kernel wrote them: one row per process (at
// most chartMaxRows), then one row per kind of mark. A mark's time can
// be the agent's (a tool call's, a shim's), so a mark outside the session
// is drawn at its edge, and says so.
func (r *Report) Chart() Chart {
	t0, t1 := r.bounds()
	span := t1.Sub(t0)
	if span <= 0 {
		span = time.Millisecond
	}
	x := func(t time.Time) float64 {
		f := float64(t.Sub(t0)) / float64(span)
		return chartLabelW + float64(chartWidth-chartLabelW-8)*min(max(f, 0), 1)
	}
	c := Chart{Width: chartWidth, More: r.chartMore}
	rowOf := map[string]int{}
	for _, s := range r.Spans {
		i, ok := rowOf[s.Row]
		if !ok {
			i = len(c.Rows)
			rowOf[s.Row] = i
			c.Rows = append(c.Rows, ChartRow{Y: 24 + i*chartRowH, Label: s.Row})
		}
		if br, ok := bar(s, x, t0, t1); ok {
			c.Rows[i].Bars = append(c.Rows[i].Bars, br)
		}
	}
	c.Height = 24 + len(c.Rows)*chartRowH + 8
	for i := 0; i <= 4; i++ {
		t := t0.Add(time.Duration(float64(span) * float64(i) / 4))
		anchor := "middle"
		if i == 4 {
			anchor = "end"
		}
		c.Ticks = append(c.Ticks, ChartTick{X: x(t), Label: "+" + t.Sub(t0).Round(time.Millisecond).String(), Anchor: anchor})
	}
	return c
}

// bar is the bar of s between the chart's times t0 and t1; a run with no
// recorded end is drawn to t1, one with no recorded start is not drawn.
func bar(s Span, x func(time.Time) float64, t0, t1 time.Time) (ChartBar, bool) {
	at := s.Start.UTC().Format("15:04:05.000")
	if s.Class != "proc" && s.Class != "script" {
		title := s.Class + " at " + at
		if s.Start.Before(t0) || s.Start.After(t1) {
			title += " (a time outside the session's, drawn at its edge)"
		}
		return ChartBar{X: x(s.Start) - 2, W: 4, Class: s.Class, Title: title}, true
	}
	if s.Start.IsZero() {
		return ChartBar{}, false
	}
	to, note := s.End, ""
	if to.IsZero() {
		to, note = t1, " (no exit recorded)"
	}
	from := x(s.Start)
	return ChartBar{X: from, W: max(x(to)-from, 1.5), Class: s.Class, Title: s.Row + ": " + to.Sub(s.Start).Round(time.Microsecond).String() + note}, true
}

// bounds are the session's first and last times as the host and the
// kernel wrote them: its start and end, and its processes' runs.
func (r *Report) bounds() (t0, t1 time.Time) {
	var ts []time.Time
	for _, t := range []time.Time{r.Facts.Start, r.Facts.End} {
		if !t.IsZero() {
			ts = append(ts, t)
		}
	}
	for _, s := range r.Spans {
		if s.Class != "proc" && s.Class != "script" {
			continue
		}
		for _, t := range []time.Time{s.Start, s.End} {
			if !t.IsZero() {
				ts = append(ts, t)
			}
		}
	}
	if len(ts) == 0 {
		for _, s := range r.Spans {
			ts = append(ts, s.Start)
		}
	}
	if len(ts) == 0 {
		return time.Time{}, time.Time{}
	}
	return slices.MinFunc(ts, time.Time.Compare), slices.MaxFunc(ts, time.Time.Compare)
}
