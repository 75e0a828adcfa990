package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// row is one benchmark of a table: the median of each of its metrics over
// the result lines of that name (one unless run with -count).
type row struct {
	name    string
	lines   int
	metrics map[string]float64
}

// rows returns a row for each benchmark of run whose name match accepts,
// in the order of the run, and the units of all their metrics: the ratios,
// then the others, then ns/op, each in the order they first appear.
func rows(run *Run, match func(name string) bool) ([]row, []string) {
	var names, units []string
	samples := map[string]map[string][]float64{}
	lines := map[string]int{}
	for _, r := range run.Results {
		if !match(r.Name) {
			continue
		}
		if samples[r.Name] == nil {
			names = append(names, r.Name)
			samples[r.Name] = map[string][]float64{}
		}
		lines[r.Name]++
		for _, m := range r.Metrics {
			if !slices.Contains(units, m.Unit) {
				units = append(units, m.Unit)
			}
			samples[r.Name][m.Unit] = append(samples[r.Name][m.Unit], m.Value)
		}
	}
	// The ratios first, what the reader looks for; ns/op, of little
	// meaning for a benchmark that interleaves rounds of its own, last.
	slices.SortStableFunc(units, func(a, b string) int { return unitRank(a) - unitRank(b) })
	rs := make([]row, 0, len(names))
	for _, n := range names {
		r := row{name: n, lines: lines[n], metrics: map[string]float64{}}
		for u, vs := range samples[n] {
			r.metrics[u] = median(vs)
		}
		rs = append(rs, r)
	}
	return rs, units
}

// unitRank orders a table's columns: ratios, then other metrics, then
// ns/op.
func unitRank(unit string) int {
	switch {
	case isRatio(unit):
		return 0
	case unit == "ns/op":
		return 2
	}
	return 1
}

// median returns the median of vs (not empty).
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// isRatio reports whether unit is a ratio against a baseline: the x-…
// metrics of the benchmarks (x_… and ratio… in older ones).
func isRatio(unit string) bool {
	return strings.HasPrefix(unit, "x-") || strings.HasPrefix(unit, "x_") || strings.HasPrefix(unit, "ratio")
}

// markdownTable renders rs as a table with a column for every unit;
// ratios are in bold, and a metric a benchmark did not report is empty.
func markdownTable(rs []row, units []string) string {
	var b strings.Builder
	b.WriteString("| benchmark |")
	for _, u := range units {
		fmt.Fprintf(&b, " %s |", cell(u))
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---:|", len(units)))
	b.WriteString("\n")
	for _, r := range rs {
		name := strings.TrimPrefix(r.name, "Benchmark")
		if r.lines > 1 {
			name += fmt.Sprintf(" (median of %d)", r.lines)
		}
		fmt.Fprintf(&b, "| %s |", cell(name))
		for _, u := range units {
			v, ok := r.metrics[u]
			switch {
			case !ok:
				b.WriteString(" |")
			case isRatio(u):
				fmt.Fprintf(&b, " **%s** |", formatValue(v))
			default:
				fmt.Fprintf(&b, " %s |", formatValue(v))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// cell escapes the characters of s that would end or break a table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "*", `\*`, "_", `\_`, "<", "&lt;").Replace(s)
}

// formatValue writes v with about four significant digits, with
// thousands separated by commas and no exponent.
func formatValue(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case v == 0:
		return "0"
	case math.Abs(v) >= 1000:
		return groupThousands(strconv.FormatFloat(math.Round(v), 'f', 0, 64))
	}
	digits := max(0, 3-int(math.Floor(math.Log10(math.Abs(v)))))
	s := strconv.FormatFloat(v, 'f', digits, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// groupThousands puts a comma between each group of three digits of the
// integer s.
func groupThousands(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + b.String()
}
