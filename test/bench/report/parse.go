package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Metric is one value of a benchmark's result line: ns/op, or a unit that
// the benchmark reported with b.ReportMetric.
type Metric struct {
	Unit  string
	Value float64
}

// Result is one result line of `go test -bench`.
type Result struct {
	Name       string // as printed, with the -GOMAXPROCS suffix, if any, removed
	Iterations int
	Metrics    []Metric
}

// Run is what one `go test -bench` output (or run.sh's, several of them
// with comment lines between) holds.
type Run struct {
	Results []Result
	// Comments are the lines that run.sh writes, starting with "# ".
	Comments []string
	// CPU is the "cpu:" header of the first package.
	CPU string
	// Failed and Skipped name the benchmarks that failed or skipped.
	Failed, Skipped []string
}

// procsSuffix is the "-N" that go test appends to a benchmark's name
// when GOMAXPROCS is N > 1.
var procsSuffix = regexp.MustCompile(`-[0-9]+$`)

// Parse reads the output of `go test -bench` (stdout; several runs may
// follow each other). It returns an error naming the line for a result line
// that does not parse (a name without an iteration count, a count or a
// value that is not a number, a value without a unit), and when the output
// holds no result at all.
func Parse(r io.Reader) (*Run, error) {
	run := &Run{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		if err := run.parseLine(sc.Text()); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the benchmark output: %w", err)
	}
	if len(run.Results) == 0 {
		return nil, fmt.Errorf("no benchmark result in the output (%d failed, %d skipped)", len(run.Failed), len(run.Skipped))
	}
	run.stripProcs()
	return run, nil
}

// parseLine reads one line of the output into run.
func (run *Run) parseLine(line string) error {
	switch {
	case strings.HasPrefix(line, "# "):
		run.Comments = append(run.Comments, strings.TrimPrefix(line, "# "))
	case strings.HasPrefix(line, "cpu: ") && run.CPU == "":
		run.CPU = strings.TrimPrefix(line, "cpu: ")
	case strings.HasPrefix(line, "--- FAIL: "), strings.HasPrefix(line, "--- SKIP: "):
		run.status(line)
	case strings.HasPrefix(line, "Benchmark"):
		name, rest, _ := strings.Cut(line, "\t")
		name, rest = strings.TrimSpace(name), strings.TrimSpace(rest)
		if strings.ContainsAny(name, " \t") {
			return fmt.Errorf("a benchmark name with a space: %q", line)
		}
		switch {
		case strings.HasPrefix(rest, "--- "):
			run.status(rest)
			return nil
		case rest == "": // the name, printed before a run that never ended
			run.Failed = append(run.Failed, name)
			return nil
		}
		res, err := parseResult(name, rest)
		if err != nil {
			return err
		}
		run.Results = append(run.Results, res)
	}
	// Anything else (headers, PASS, ok, the benchmarks' logs, which are
	// indented) is not a result.
	return nil
}

// status records a "--- FAIL: name" or "--- SKIP: name" line.
func (run *Run) status(line string) {
	f := strings.Fields(line)
	if len(f) < 3 {
		return
	}
	if f[1] == "FAIL:" {
		run.Failed = append(run.Failed, f[2])
	} else {
		run.Skipped = append(run.Skipped, f[2])
	}
}

// parseResult reads the fields after a result line's name: the iteration
// count, then pairs of a value and its unit.
func parseResult(name, rest string) (Result, error) {
	f := strings.Fields(rest)
	if len(f) == 0 {
		return Result{}, fmt.Errorf("benchmark %s: no iteration count", name)
	}
	iters, err := strconv.Atoi(f[0])
	if err != nil || iters <= 0 {
		return Result{}, fmt.Errorf("benchmark %s: iteration count %q is not a positive integer", name, f[0])
	}
	if len(f)%2 != 1 {
		return Result{}, fmt.Errorf("benchmark %s: value %q has no unit", name, f[len(f)-1])
	}
	res := Result{Name: name, Iterations: iters}
	for i := 1; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Result{}, fmt.Errorf("benchmark %s: value %q (of %s) is not a number", name, f[i], f[i+1])
		}
		if _, err := strconv.ParseFloat(f[i+1], 64); err == nil {
			return Result{}, fmt.Errorf("benchmark %s: unit %q is a number", name, f[i+1])
		}
		res.Metrics = append(res.Metrics, Metric{Unit: f[i+1], Value: v})
	}
	return res, nil
}

// stripProcs removes the -GOMAXPROCS suffix from the results' names: when
// every name ends in the same "-N", that is go test's suffix (with
// GOMAXPROCS=1 there is none, and a name may end in digits of its own).
func (run *Run) stripProcs() {
	suffix := procsSuffix.FindString(run.Results[0].Name)
	if suffix == "" {
		return
	}
	for _, r := range run.Results {
		if !strings.HasSuffix(r.Name, suffix) {
			return
		}
	}
	for i := range run.Results {
		run.Results[i].Name = strings.TrimSuffix(run.Results[i].Name, suffix)
	}
	for _, names := range []*[]string{&run.Failed, &run.Skipped} {
		for i, n := range *names {
			(*names)[i] = strings.TrimSuffix(n, suffix)
		}
	}
}
