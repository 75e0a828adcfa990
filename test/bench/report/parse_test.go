package main

import (
	"strings"
	"testing"
)

// sample is an excerpt of run.sh's output: two packages, a sub-benchmark,
// custom metrics, a skip, a failure and the benchmarks' logs.
const sample = `# 2026-12-02T21:14:50Z 6.18.44 2 cores, load: 1.2 1.1 0.9
# BenchmarkMirrorThroughput -benchtime 1x
goos: linux
goarch: amd64
pkg: github.com/sandtrail/sandtrail/test/bench
cpu: AMD EPYC
BenchmarkMirrorThroughput/tarball-2         	       1	5012345678 ns/op	      10500 rps-nginx	      4100 rps-sandtrail	         0.3905 x-sandtrail-nginx	        17.60 x-sandtrail-verdaccio
BenchmarkMirrorThroughput/packument-2       	       1	5012345678 ns/op	         0.62 x-sandtrail-nginx
--- BENCH: BenchmarkMirrorThroughput/packument-2
    mirror_linux_test.go:12: a log line	with a tab
BenchmarkCollectorExecStorm-2   	--- SKIP: BenchmarkCollectorExecStorm-2
BenchmarkRunNpmInstall/hosted-2 	--- FAIL: BenchmarkRunNpmInstall/hosted-2
    runnpm_linux_test.go:99: npm install: exit status 1
PASS
# BenchmarkMirrorThroughput took 40 s
pkg: github.com/sandtrail/sandtrail/record/event
BenchmarkMarshal-2   	  500000	      2345 ns/op	    1.5 x-json	 512 B/op	 3 allocs/op
BenchmarkMarshal-2   	  500000	      2445 ns/op	    1.7 x-json	 512 B/op	 3 allocs/op
ok  	github.com/sandtrail/sandtrail/record/event	3.1s
# total 1234 s
`

func TestParseReadsEveryMetric(t *testing.T) {
	run, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Results) != 4 {
		t.Fatalf("got %d results, want 4: %+v", len(run.Results), run.Results)
	}
	tb := run.Results[0]
	if tb.Name != "BenchmarkMirrorThroughput/tarball" || tb.Iterations != 1 || len(tb.Metrics) != 5 {
		t.Fatalf("first result = %+v", tb)
	}
	if m := tb.Metrics[3]; m.Unit != "x-sandtrail-nginx" || m.Value != 0.3905 {
		t.Errorf("metric 3 = %+v, want x-sandtrail-nginx 0.3905", m)
	}
	if run.Results[2].Name != "BenchmarkMarshal" || run.Results[2].Metrics[3] != (Metric{"allocs/op", 3}) {
		t.Errorf("third result = %+v", run.Results[2])
	}
	if strings.Join(run.Skipped, ",") != "BenchmarkCollectorExecStorm" || strings.Join(run.Failed, ",") != "BenchmarkRunNpmInstall/hosted" {
		t.Errorf("skipped %v, failed %v", run.Skipped, run.Failed)
	}
	if run.CPU != "AMD EPYC" || len(run.Comments) != 4 || run.Comments[3] != "total 1234 s" {
		t.Errorf("cpu %q, comments %q", run.CPU, run.Comments)
	}
}

func TestParseKeepsDigitsOfANameWithoutProcs(t *testing.T) {
	run, err := Parse(strings.NewReader("BenchmarkA/size-100 \t 1 \t 5 ns/op\nBenchmarkA/size-200 \t 1 \t 7 ns/op\n"))
	if err != nil {
		t.Fatal(err)
	}
	if run.Results[0].Name != "BenchmarkA/size-100" {
		t.Errorf("name = %q: a suffix that differs between results is not GOMAXPROCS's", run.Results[0].Name)
	}
}

func TestParseRejectsMalformedResults(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "no benchmark result"},
		{"only logs", "PASS\nok x 1s\n", "no benchmark result"},
		{"count not a number", "BenchmarkA-2\tmany\t5 ns/op\n", `iteration count "many"`},
		{"count zero", "BenchmarkA-2\t0\t5 ns/op\n", "not a positive integer"},
		{"value without unit", "BenchmarkA-2\t1\t5 ns/op\t7\n", `value "7" has no unit`},
		{"value not a number", "BenchmarkA-2\t1\tfive ns/op\n", `value "five" (of ns/op) is not a number`},
		{"unit is a number", "BenchmarkA-2\t1\t5 6\n", `unit "6" is a number`},
		{"name with a space", "BenchmarkA B\t1\t5 ns/op\n", "with a space"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) = %v, want an error with %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestParseNamesTheLine(t *testing.T) {
	_, err := Parse(strings.NewReader("goos: linux\nBenchmarkA-2\t1\t5 ns/op\nBenchmarkB-2\t1\tx ns/op\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "line 3: ") {
		t.Fatalf("err = %v, want it to name line 3", err)
	}
}

// FuzzParse checks that Parse never panics, and that what it accepts is
// consistent: every result has a name, a positive count and metrics with
// units; and that rendering the run never panics either.
func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("BenchmarkA-2\t1\t5 ns/op\n")
	f.Add("BenchmarkA-2\t\n")
	f.Add("BenchmarkA-2\t1\tNaN x-a\t+Inf x-b\t-0 x-c\n")
	f.Fuzz(func(t *testing.T, in string) {
		run, err := Parse(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, r := range run.Results {
			if !strings.HasPrefix(r.Name, "Benchmark") || r.Iterations <= 0 {
				t.Fatalf("accepted %+v", r)
			}
			for _, m := range r.Metrics {
				if m.Unit == "" {
					t.Fatalf("accepted a metric without a unit: %+v", r)
				}
			}
		}
		rs, units := rows(run, func(string) bool { return true })
		markdownTable(rs, units)
		ratioChart("fuzz", ratioBars(rs, units))
		targetsTable(run)
	})
}
