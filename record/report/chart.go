package report

import (
	"fmt"
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

// spans lists the processes' runs, depth first, then the marks.
func (b *Builder) spans() []Span {
	var out []Span
	var walk func(ps []*timeline.Proc, depth int)
	walk = func(ps []*timeline.Proc, depth int) {
		for _, p := range ps {
			label := fmt.Sprintf("%*s%d %s", depth, "", p.Pid, procName(p))
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

// procName is a process's name for a label: its argv[0]'s base, else its
// comm.
func procName(p *timeline.Proc) string {
	if len(p.Argv) > 0 {
		a := p.Argv[0]
		for i := len(a) - 1; i >= 0; i-- {
			if a[i] == '/' {
				a = a[i+1:]
				break
			}
		}
		if a != "" {
			return render.Clean(a, 24)
		}
	}
	return render.Clean(p.Comm, 24)
}

// Chart lays out the report's spans between the session's first and last
// times: one row per process (at most chartMaxRows), then one row per kind
// of mark.
func (r *Report) Chart() Chart {
	t0, t1 := r.bounds()
	span := t1.Sub(t0)
	if span <= 0 {
		span = time.Millisecond
	}
	x := func(t time.Time) float64 {
		if t.IsZero() {
			return chartLabelW
		}
		return chartLabelW + float64(chartWidth-chartLabelW-8)*float64(t.Sub(t0))/float64(span)
	}
	c := Chart{Width: chartWidth}
	rowOf := map[string]int{}
	procs := 0
	for _, s := range r.Spans {
		isProc := s.Class == "proc" || s.Class == "script"
		i, ok := rowOf[s.Row]
		if !ok {
			if isProc && procs >= chartMaxRows {
				c.More++
				continue
			}
			if isProc {
				procs++
			}
			i = len(c.Rows)
			rowOf[s.Row] = i
			c.Rows = append(c.Rows, ChartRow{Y: 24 + i*chartRowH, Label: s.Row})
		}
		c.Rows[i].Bars = append(c.Rows[i].Bars, bar(s, x, t1))
	}
	c.Height = 24 + len(c.Rows)*chartRowH + 8
	for i := 0; i <= 4; i++ {
		t := t0.Add(span * time.Duration(i) / 4)
		anchor := "middle"
		if i == 4 {
			anchor = "end"
		}
		c.Ticks = append(c.Ticks, ChartTick{X: x(t), Label: "+" + t.Sub(t0).Round(time.Millisecond).String(), Anchor: anchor})
	}
	return c
}

// bar is the bar of s; a run with no recorded end is drawn to end.
func bar(s Span, x func(time.Time) float64, end time.Time) ChartBar {
	from := x(s.Start)
	if s.Class != "proc" && s.Class != "script" {
		return ChartBar{X: from - 2, W: 4, Class: s.Class, Title: s.Class + " at " + s.Start.UTC().Format("15:04:05.000")}
	}
	to, title := s.End, ""
	if to.IsZero() {
		to, title = end, " (no exit recorded)"
	}
	w := max(x(to)-from, 1.5)
	return ChartBar{X: from, W: w, Class: s.Class, Title: s.Row + ": " + to.Sub(s.Start).Round(time.Microsecond).String() + title}
}

// bounds are the earliest and latest times of the session's spans and
// facts.
func (r *Report) bounds() (t0, t1 time.Time) {
	var ts []time.Time
	for _, t := range []time.Time{r.Facts.Start, r.Facts.End} {
		if !t.IsZero() {
			ts = append(ts, t)
		}
	}
	for _, s := range r.Spans {
		for _, t := range []time.Time{s.Start, s.End} {
			if !t.IsZero() {
				ts = append(ts, t)
			}
		}
	}
	if len(ts) == 0 {
		return time.Time{}, time.Time{}
	}
	return slices.MinFunc(ts, time.Time.Compare), slices.MaxFunc(ts, time.Time.Compare)
}
