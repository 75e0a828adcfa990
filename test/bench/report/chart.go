package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// bar is one ratio of a chart.
type bar struct {
	label string
	value float64
}

// The chart's layout, in pixels.
const (
	chartWidth  = 760
	chartLabelW = 330 // the labels' column
	chartValueW = 70  // the values' column, right of the plot
	chartRowH   = 20
	chartTop    = 34 // the title
	chartBottom = 34 // the axis and its ticks
)

// ratioBars returns a bar for each ratio metric of rs, labelled with the
// benchmark and the unit.
func ratioBars(rs []row, units []string) []bar {
	var bars []bar
	for _, r := range rs {
		for _, u := range units {
			if v, ok := r.metrics[u]; ok && isRatio(u) {
				bars = append(bars, bar{label: strings.TrimPrefix(r.name, "Benchmark") + "  " + u, value: v})
			}
		}
	}
	return bars
}

// ratioChart draws bars as a self-contained SVG: one horizontal bar per
// ratio, from the baseline's 1.0 line to the ratio, on a log scale (so
// that 0.5 and 2 are as far from 1, and ratios of 1.05 and of 4,000 fit
// one chart). A ratio that is not a positive number gets no bar, and n/a.
func ratioChart(title string, bars []bar) string {
	lo, hi := chartDomain(bars)
	plotW := float64(chartWidth - chartLabelW - chartValueW - 10)
	x := func(v float64) float64 {
		return chartLabelW + (math.Log(v)-math.Log(lo))/(math.Log(hi)-math.Log(lo))*plotW
	}
	height := chartTop + len(bars)*chartRowH + chartBottom
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	axisY := chartTop + len(bars)*chartRowH
	for _, t := range chartTicks(lo, hi) {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(t), chartTop-4, x(t), axisY)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", x(t), axisY+16, formatValue(t))
	}
	for i, br := range bars {
		y := chartTop + i*chartRowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", chartLabelW-8, y+14, html.EscapeString(br.label))
		if !(br.value > 0) || math.IsInf(br.value, 0) {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#555">n/a</text>`+"\n", x(1)+4, y+14)
			continue
		}
		x0, x1 := math.Min(x(1), x(br.value)), math.Max(x(1), x(br.value))
		fill := "#4878a8" // above the baseline
		if br.value < 1 {
			fill = "#e08a3c"
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, y+3, math.Max(x1-x0, 1), chartRowH-6, fill)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s×</text>`+"\n", chartWidth-chartValueW, y+14, formatValue(br.value))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000" stroke-dasharray="4 3"/>`+"\n", x(1), chartTop-8, x(1), axisY)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">the same run's baseline (ratio, log scale)</text>`+"\n",
		chartLabelW+plotW/2, axisY+31)
	b.WriteString("</svg>\n")
	return b.String()
}

// chartDomain returns the ends of the chart's scale: the smallest and the
// largest of the ratios and 1, with a margin.
func chartDomain(bars []bar) (lo, hi float64) {
	lo, hi = 1, 1
	for _, br := range bars {
		if br.value > 0 && !math.IsInf(br.value, 0) {
			lo, hi = math.Min(lo, br.value), math.Max(hi, br.value)
		}
	}
	return lo / 1.15, hi * 1.15
}

// chartTicks returns the ticks of the scale from lo to hi: 1, 2 and 5
// times the powers of ten, and the tenths between 0.5 and 2 when the
// range is narrow; at most nine of them, always with 1.
func chartTicks(lo, hi float64) []float64 {
	var ts []float64
	for e := -6; e <= 9; e++ {
		for _, m := range []float64{1, 2, 5} {
			ts = append(ts, m*math.Pow10(e))
		}
	}
	if hi/lo < 4 {
		for t := 0.5; t <= 2.05; t += 0.1 {
			ts = append(ts, math.Round(t*10)/10)
		}
	}
	slices.Sort(ts)
	ts = slices.Compact(ts)
	in := slices.DeleteFunc(ts, func(t float64) bool { return t < lo || t > hi })
	for step := 2; len(in) > 9; step++ {
		var thin []float64
		for i, t := range in {
			if i%step == 0 || t == 1 {
				thin = append(thin, t)
			}
		}
		if len(thin) < len(in) {
			in = thin
		}
	}
	return in
}
