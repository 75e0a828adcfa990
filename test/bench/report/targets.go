package main

import (
	"fmt"
	"strings"
)

// target is one target of the project's issues, read from one metric of
// one benchmark of the run.
type target struct {
	goal   string  // the target, as the issue states it
	bench  string  // the benchmark's full name, as the run prints it
	metric string  // the unit of the metric that measures it
	op     string  // how the metric must compare with limit: "<=", "<" or ">="
	limit  float64 // the target's figure
}

// targets are the targets that `make bench` measures, each with the
// metric that is its figure.
var targets = []target{
	{"exec storm (20k execs) ≤1.05× no collector, wall", "BenchmarkCollectorExecStorm", "x-sandtrail-wall", "<=", 1.05},
	{"exec storm ≤1.05× no collector, CPU", "BenchmarkCollectorExecStorm", "x-sandtrail-cpu", "<=", 1.05},
	{"exec storm: sandtrail's overhead ≤¼ of auditd's", "BenchmarkCollectorExecStorm", "overhead-vs-auditd-wall", "<=", 0.25},
	{"file workload (untar and walk 20,100 files) ≤1.05×", "BenchmarkCollectorFiles/untar-walk", "x-sandtrail-wall", "<=", 1.05},
	{"file workload, stricter (untar, walk, read, rm) ≤1.05×", "BenchmarkCollectorFiles/untar-walk-read-rm", "x-sandtrail-wall", "<=", 1.05},
	{"loopback HTTP keep-alive (wrk) ≤1.05×", "BenchmarkCollectorHTTP/keepalive", "x-sandtrail-wall", "<=", 1.05},
	{"loopback HTTP, Connection: close ≤1.05×", "BenchmarkCollectorHTTP/close", "x-sandtrail-wall", "<=", 1.05},
	{"shim's own cost ≤3 ms (a fixture manager: /bin/true)", "BenchmarkShimVersion/fixture", "added-ms", "<=", 3},
	{"shim adds ≤3 ms to cargo --version", "BenchmarkShimVersion/cargo", "added-ms", "<=", 3},
	{"shim adds ≤3 ms to npm --version", "BenchmarkShimVersion/npm", "added-ms", "<=", 3},
	{"shim adds ≤3 ms to pip --version", "BenchmarkShimVersion/pip", "added-ms", "<=", 3},
	{"warm npm install through the mirror ≤1.10× nginx", "BenchmarkMirrorInstall", "x-sandtrail-nginx", "<=", 1.10},
	{"warm npm install through the mirror faster than Verdaccio", "BenchmarkMirrorInstall", "x-sandtrail-verdaccio", "<", 1},
	{"tarball throughput ≥0.5× nginx", "BenchmarkMirrorThroughput/tarball", "x-sandtrail-nginx", ">=", 0.5},
	{"tarball throughput ≥2× Verdaccio", "BenchmarkMirrorThroughput/tarball", "x-sandtrail-verdaccio", ">=", 2},
	{"packument throughput ≥0.5× nginx", "BenchmarkMirrorThroughput/packument", "x-sandtrail-nginx", ">=", 0.5},
	{"packument throughput ≥2× Verdaccio", "BenchmarkMirrorThroughput/packument", "x-sandtrail-verdaccio", ">=", 2},
	{"express packument (290 versions) ≥0.5× nginx", "BenchmarkMirrorThroughput/packument-express", "x-sandtrail-nginx", ">=", 0.5},
	{"lodash packument (117 versions) ≥0.5× nginx", "BenchmarkMirrorThroughput/packument-lodash", "x-sandtrail-nginx", ">=", 0.5},
	{"@types/node packument (2,350 versions) ≥0.5× nginx", "BenchmarkMirrorThroughput/packument-types-node", "x-sandtrail-nginx", ">=", 0.5},
	{"ingest ≥100k events/s with checkpoint signing (4 clients × 256)", "BenchmarkIngest/clients=4/batch=256", "socket_ev/s", ">=", 100_000},
	{"verify ≥1M events/s", "BenchmarkJournalVerify", "events/s", ">=", 1_000_000},
	{"question 1 (path prefix) ≤100 ms over 10^7 events", "BenchmarkIndexQuestions/1-path-prefix", "median-ms", "<=", 100},
	{"question 1 (path glob) ≤100 ms", "BenchmarkIndexQuestions/1-path-glob", "median-ms", "<=", 100},
	{"question 2 (domain suffix) ≤100 ms", "BenchmarkIndexQuestions/2-domain-suffix", "median-ms", "<=", 100},
	{"question 3 (package exact) ≤100 ms", "BenchmarkIndexQuestions/3-package-exact", "median-ms", "<=", 100},
	{"question 3 (package range) ≤100 ms", "BenchmarkIndexQuestions/3-package-range", "median-ms", "<=", 100},
	{"question 4 (end reason) ≤100 ms", "BenchmarkIndexQuestions/4-end-reason", "median-ms", "<=", 100},
	{"question 5 (timeline) ≤100 ms", "BenchmarkIndexQuestions/5-timeline", "median-ms", "<=", 100},
	{"sandtrail hunt over 10^7 events ≤1 s", "BenchmarkHunt", "hunt-ms", "<=", 1000},
	{"run -- true over a 10^6-entry journal within 10% of 10^3", "BenchmarkRunJournalSize", "ratio", "<=", 1.10},
	{"run -- true on a daemon host ≤100 ms", "BenchmarkRunTrue/daemon", "ms/run", "<=", 100},
	{"run -- true standalone ≤1 s", "BenchmarkRunTrue/standalone", "ms/run", "<=", 1000},
	{"journal close at the daemon's shutdown ≤100 ms", "BenchmarkRunTrue/daemon", "journal-close-ms", "<=", 100},
	{"npm install in a hosted session ≤1.10× outside one", "BenchmarkRunNpmInstall/hosted", "x-session", "<=", 1.10},
	{"npm install in a daemon's session ≤1.10× outside one", "BenchmarkRunNpmInstall/daemon", "x-session", "<=", 1.10},
	{"rule engine ≤10% of an event's path into the journal (16 µs)", "BenchmarkDetectorAdd/detector", "ns/op", "<=", 1600},
	{"alert within 1 s of its event, p99", "BenchmarkAlertLatency", "p99_us", "<=", 1_000_000},
	{"event to the jsonl file sink p99 ≤1 s at 10k events/s", "BenchmarkSinkLatency", "file_p99_us", "<=", 1_000_000},
	{"journal ingest with 3 sinks ≥0.9 of none", "BenchmarkIngestWithSinks", "ratio", ">=", 0.9},
	{"hosts → central store (3 hosts, NATS, aggregator, chains verified) ≥0.5× the journals alone", "BenchmarkCentralIngest", "x-of-journal", ">=", 0.5},
	{"central store: question 1 (path prefix) ≤100 ms over 10^7 events", "BenchmarkCentralQuestions/1-path-prefix", "median-ms", "<=", 100},
	{"central store: question 1 (path glob) ≤100 ms", "BenchmarkCentralQuestions/1-path-glob", "median-ms", "<=", 100},
	{"central store: question 2 (domain suffix) ≤100 ms", "BenchmarkCentralQuestions/2-domain-suffix", "median-ms", "<=", 100},
	{"central store: question 3 (package exact) ≤100 ms", "BenchmarkCentralQuestions/3-package-exact", "median-ms", "<=", 100},
	{"central store: question 3 (package range) ≤100 ms", "BenchmarkCentralQuestions/3-package-range", "median-ms", "<=", 100},
	{"central store: question 4 (end reason) ≤100 ms", "BenchmarkCentralQuestions/4-end-reason", "median-ms", "<=", 100},
	{"central store: question 5 (timeline) ≤100 ms", "BenchmarkCentralQuestions/5-timeline", "median-ms", "<=", 100},
	{"MCP proxy adds ≤1 ms per tools/call at p50 (100 B)", "BenchmarkMCPProxy/100B", "added-p50-us", "<=", 1000},
}

// met reports whether v meets t.
func (t target) met(v float64) bool {
	switch t.op {
	case "<=":
		return v <= t.limit
	case "<":
		return v < t.limit
	default:
		return v >= t.limit
	}
}

// targetsTable renders the targets with their figures from run; a target
// whose benchmark or metric is not in the run says so.
func targetsTable(run *Run) string {
	var b strings.Builder
	b.WriteString("| target | benchmark | metric | figure | measured | met |\n|---|---|---|---|---:|---|\n")
	for _, t := range targets {
		rs, _ := rows(run, func(name string) bool { return name == t.bench })
		measured, met := "not in this run", "—"
		if len(rs) == 1 {
			if v, ok := rs[0].metrics[t.metric]; ok {
				measured, met = formatValue(v), "**no**"
				if t.met(v) {
					met = "yes"
				}
			}
		}
		sym := map[string]string{"<=": "≤", "<": "&lt;", ">=": "≥"}[t.op]
		fmt.Fprintf(&b, "| %s | %s | %s | %s %s | %s | %s |\n", cell(t.goal),
			cell(strings.TrimPrefix(t.bench, "Benchmark")), cell(t.metric), sym, formatValue(t.limit), measured, met)
	}
	return b.String()
}
