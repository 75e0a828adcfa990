// Command report regenerates the tables and charts of docs/benchmarks.md
// from the output of a `make bench` run (test/bench/run.sh).
//
// It reads the `go test -bench` output (each result line's benchmark, its
// ns/op and every metric the benchmark reported), and replaces the body of
// each generated region of the document, the lines between
// "<!-- bench:KEY -->" and "<!-- /bench -->", leaving the prose around
// them as it is. KEY is a regexp of benchmark names: the region becomes a
// table for each top-level benchmark it matches, with a row per
// sub-benchmark and a column per metric (so a benchmark that reports a new
// metric gets a new column, with no change here), followed by a bar chart of the ratios (the x-… metrics,
// against the same run's baseline) written as a self-contained SVG into
// the charts directory. Three keys are special: "targets" (each target of
// the issues, the metric that measures it and whether it is met),
// "run" (when and where the run was made, and how long it took) and
// "rest" (the benchmarks no other region matches).
//
// Usage:
//
//	go run ./test/bench/report [-partial] -doc docs/benchmarks.md -charts docs/bench results.txt
//
// A region whose key matches no benchmark of the run is an error, unless
// -partial (a run of some benchmarks only) keeps it as it was; -partial
// also keeps the "targets" and "run" regions, which are of a whole run.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	doc := flag.String("doc", "docs/benchmarks.md", "the document whose regions to regenerate")
	charts := flag.String("charts", "docs/bench", "the directory of the charts")
	partial := flag.Bool("partial", false, "keep the regions that match no benchmark of the run")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: report [-partial] -doc FILE -charts DIR BENCH-OUTPUT")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *doc, *charts, *partial); err != nil {
		fmt.Fprintf(os.Stderr, "report: %v\n", err)
		os.Exit(1)
	}
}

// run regenerates doc and its charts from the benchmark output in input.
func run(input, doc, charts string, partial bool) error {
	f, err := os.Open(input)
	if err != nil {
		return err
	}
	defer f.Close()
	res, err := Parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", input, err)
	}
	text, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(doc), charts)
	if err != nil {
		return err
	}
	r := &report{run: res, chartsLink: filepath.ToSlash(rel), partial: partial, written: map[string]string{}}
	out, err := r.regenerate(string(text))
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	if err := os.MkdirAll(charts, 0o755); err != nil {
		return err
	}
	for name, svg := range r.written {
		if err := os.WriteFile(filepath.Join(charts, name), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(doc, []byte(out), 0o644)
}

// report regenerates one document from one run.
type report struct {
	run        *Run
	chartsLink string // the charts directory, relative to the document
	partial    bool
	written    map[string]string // the charts made, by file name
}

// regenerate returns doc with its regions regenerated.
func (r *report) regenerate(doc string) (string, error) {
	keys, err := regionKeys(doc)
	if err != nil {
		return "", err
	}
	var patterns []*regexp.Regexp
	for _, k := range keys {
		if k == "targets" || k == "run" || k == "rest" {
			continue
		}
		re, err := regexp.Compile(k)
		if err != nil {
			return "", fmt.Errorf("region %q: %w", k, err)
		}
		patterns = append(patterns, re)
	}
	rest := func(name string) bool {
		for _, re := range patterns {
			if re.MatchString(name) {
				return false
			}
		}
		return true
	}
	return replaceRegions(doc, func(key string) (string, bool, error) {
		switch key {
		case "targets", "run":
			if r.partial { // they are of the whole run
				return "", false, nil
			}
			if key == "targets" {
				return targetsTable(r.run), true, nil
			}
			return r.runLine(), true, nil
		case "rest":
			return r.group(key, rest)
		}
		return r.group(key, regexp.MustCompile(key).MatchString)
	})
}

// group renders the table and the chart of the benchmarks that match
// accepts; ok is false when none does and the report is partial.
func (r *report) group(key string, match func(string) bool) (string, bool, error) {
	rs, units := rows(r.run, match)
	if len(rs) == 0 {
		switch {
		case r.partial:
			return "", false, nil
		case key == "rest": // every benchmark has its region
			return "", true, nil
		}
		return "", false, fmt.Errorf("no benchmark of the run matches (run with -partial for a part of the benchmarks)")
	}
	var tables []string
	for _, top := range topLevel(rs) {
		trs, tunits := rows(r.run, func(name string) bool { return match(name) && topName(name) == top })
		tables = append(tables, markdownTable(trs, tunits))
	}
	body := strings.Join(tables, "\n")
	if bars := ratioBars(rs, units); len(bars) > 0 {
		name := chartName(key)
		r.written[name] = ratioChart(key+": ratios against the same run's baseline", bars)
		body += fmt.Sprintf("\n![the ratios of the table against the same run's baseline](%s/%s)\n", r.chartsLink, name)
	}
	return body, true, nil
}

// topName is the top-level benchmark of a result's name: the part before
// the first "/".
func topName(name string) string {
	top, _, _ := strings.Cut(name, "/")
	return top
}

// topLevel returns the top-level benchmarks of rs, in order: each gets a
// table of its own, with the columns of its own metrics.
func topLevel(rs []row) []string {
	var tops []string
	for _, r := range rs {
		if t := topName(r.name); !slices.Contains(tops, t) {
			tops = append(tops, t)
		}
	}
	return tops
}

// chartName is the file name of a region's chart.
func chartName(key string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(key, "^"), "Benchmark")) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-") + ".svg"
}

// runLine says when the run was made, on what, and how long it took,
// from run.sh's comment lines.
func (r *report) runLine() string {
	var head, total string
	for _, c := range r.run.Comments {
		switch {
		case head == "" && strings.Contains(c, "cores"):
			head = c
		case strings.HasPrefix(c, "total "):
			total = minutes(strings.TrimPrefix(c, "total "))
		}
	}
	s := "Generated from one `make bench` run"
	if head != "" {
		s += ": " + head
	}
	if r.run.CPU != "" {
		s += "; cpu: " + r.run.CPU
	}
	if total != "" {
		s += "; the whole run took " + total
	}
	s += fmt.Sprintf("; %d result lines", len(r.run.Results))
	if len(r.run.Failed) > 0 {
		s += "; **failed: " + strings.Join(r.run.Failed, ", ") + "**"
	}
	if len(r.run.Skipped) > 0 {
		s += "; skipped: " + strings.Join(r.run.Skipped, ", ")
	}
	return cellFree(s) + ".\n"
}

// minutes writes run.sh's "N s" as minutes and seconds.
func minutes(total string) string {
	s, err := strconv.Atoi(strings.TrimSuffix(total, " s"))
	if err != nil {
		return total
	}
	return fmt.Sprintf("%d min %02d s", s/60, s%60)
}

// cellFree returns s with the characters that markdown would read as
// emphasis outside a table escaped, but the bold of a failure.
func cellFree(s string) string {
	return strings.NewReplacer("_", `\_`, "<", "&lt;").Replace(s)
}
