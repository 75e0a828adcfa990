package bench

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
)

// policyRequest is an ordinary install: an old lodash from the public
// registry, not on any list.
func policyRequest() policies.PackageRequest {
	return policies.PackageRequest{
		Ecosystem: "npm", Name: "lodash", Version: "4.17.21", Requested: "^4.17.0",
		Source:    "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz",
		Published: time.Date(2021, 2, 20, 15, 42, 16, 0, time.UTC),
	}
}

// policyCPU returns the process's user+system CPU time. On a machine shared
// with other builds, CPU time per operation varies far less than wall time.
func policyCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// policyMeasure runs op in a b.Loop and returns wall and CPU ns per op.
func policyMeasure(b *testing.B, op func()) (wall, cpu float64) {
	b.ReportAllocs()
	c0 := policyCPU()
	for b.Loop() {
		op()
	}
	c1 := policyCPU()
	n := float64(b.N)
	cpu = float64((c1 - c0).Nanoseconds()) / n
	b.ReportMetric(cpu, "cpu-ns/op")
	return float64(b.Elapsed().Nanoseconds()) / n, cpu
}

// policyMarshalBaseline is the baseline: encoding the pkg.install event that
// the mirror writes for the same fetch anyway (event.Marshal).
func policyMarshalBaseline(b *testing.B) (wall, cpu float64) {
	r := policyRequest()
	ev := &event.Event{V: event.SchemaVersion, TS: time.Now(), SessionID: "s-1", Kind: event.KindPkgInstall, Source: event.SourceMirror,
		Pkg: &event.Pkg{Manager: "npm", Ecosystem: r.Ecosystem, Name: r.Name, Requested: r.Requested, Resolved: r.Version,
			SourceURL: r.Source, Hash: "sha512-" + strings.Repeat("A", 86), Verdict: "allow", Reason: "no check blocks or flags it"}}
	return policyMeasure(b, func() {
		if _, err := event.Marshal(ev); err != nil {
			b.Fatal(err)
		}
	})
}

// policyEngine builds an engine from the default policy with n extra npm
// blocklist entries, each with a range.
func policyEngine(b *testing.B, n int) *policies.Engine {
	b.Helper()
	p, err := policies.Parse("default.yaml", policies.DefaultYAML())
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		p.Blocklist = append(p.Blocklist, policies.BlockEntry{
			Purl: fmt.Sprintf("pkg:npm/pkg-%d@<1.%d.0 || >=3.0.0 <3.%d.5", i, i%50, i%7), Reason: "bench"})
	}
	e, err := policies.New(p)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkPolicyDecisions measures the engine's decisions, each reported as
// a ratio to encoding the pkg.install event for the same fetch, measured in
// the same run: what a decision adds to every fetch the mirror serves.
func BenchmarkPolicyDecisions(b *testing.B) {
	var baseWall, baseCPU float64
	b.Run("marshal-baseline", func(b *testing.B) { baseWall, baseCPU = policyMarshalBaseline(b) })
	run := func(b *testing.B, op func()) {
		wall, cpu := policyMeasure(b, op)
		if baseWall > 0 && baseCPU > 0 {
			b.ReportMetric(wall/baseWall, "x-marshal-wall")
			b.ReportMetric(cpu/baseCPU, "x-marshal-cpu")
		}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		extra int
		req   func(policies.PackageRequest) policies.PackageRequest
	}{
		{name: "package-default", req: func(r policies.PackageRequest) policies.PackageRequest { return r }},
		{name: "package-blocklist-1000-miss", extra: 1000, req: func(r policies.PackageRequest) policies.PackageRequest { return r }},
		{name: "package-blocklist-1000-range", extra: 1000, req: func(r policies.PackageRequest) policies.PackageRequest {
			r.Name, r.Version = "pkg-999", "3.1.0"
			return r
		}},
	} {
		e := policyEngine(b, tc.extra)
		req := tc.req(policyRequest())
		b.Run(tc.name, func(b *testing.B) { run(b, func() { e.Package(ctx, req) }) })
	}
	e := policyEngine(b, 0)
	ip := netip.MustParseAddr("104.16.2.35")
	b.Run("egress-default", func(b *testing.B) { run(b, func() { e.Egress("registry.npmjs.org", ip, 443, "tcp") }) })
	b.Run("fileread-default", func(b *testing.B) {
		run(b, func() { e.FileRead("/home/agent/project/node_modules/lodash/lodash.js") })
	})
}

// BenchmarkPolicyLoad measures loading and validating default.yaml against
// a baseline, in the same run, of only decoding the same YAML into a map.
func BenchmarkPolicyLoad(b *testing.B) {
	data := policies.DefaultYAML()
	var baseWall, baseCPU float64
	b.Run("yaml-baseline", func(b *testing.B) {
		baseWall, baseCPU = policyMeasure(b, func() {
			var m map[string]any
			if err := yaml.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("parse-default", func(b *testing.B) {
		wall, cpu := policyMeasure(b, func() {
			if _, err := policies.Parse("default.yaml", data); err != nil {
				b.Fatal(err)
			}
		})
		if baseWall > 0 && baseCPU > 0 {
			b.ReportMetric(wall/baseWall, "x-yaml-wall")
			b.ReportMetric(cpu/baseCPU, "x-yaml-cpu")
		}
	})
}
