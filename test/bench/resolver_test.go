package bench

import (
	"fmt"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/sandtrail/sandtrail/resolver"
)

// resolverPairs returns, per ecosystem, the same 64 (spec, version) questions written in each
// ecosystem's syntax: a caret, a tilde, a range of two comparators and an exact pin, over
// versions 1.0.0 .. 4.3.0.
func resolverPairs() map[string][][2]string {
	out := map[string][][2]string{}
	for i := 0; i < 64; i++ {
		major, minor := 1+i%4, i%4
		v := fmt.Sprintf("%d.%d.0", major, minor)
		lo := fmt.Sprintf("%d.%d.0", 1+(i/4)%4, (i/16)%4)
		switch i % 4 {
		case 0:
			out["masterminds"] = append(out["masterminds"], [2]string{"^" + lo, v})
			out["npm"] = append(out["npm"], [2]string{"^" + lo, v})
			out["cargo"] = append(out["cargo"], [2]string{lo, v})
			out["pypi"] = append(out["pypi"], [2]string{">=" + lo + ",==" + lo[:1] + ".*", v})
			out["deb"] = append(out["deb"], [2]string{">= " + lo + "-1", v + "-1"})
		case 1:
			out["masterminds"] = append(out["masterminds"], [2]string{"~" + lo, v})
			out["npm"] = append(out["npm"], [2]string{"~" + lo, v})
			out["cargo"] = append(out["cargo"], [2]string{"~" + lo, v})
			out["pypi"] = append(out["pypi"], [2]string{"~=" + lo, v})
			out["deb"] = append(out["deb"], [2]string{"<< " + lo + "~", v + "-1"})
		case 2:
			out["masterminds"] = append(out["masterminds"], [2]string{">=" + lo + " <4.0.0", v})
			out["npm"] = append(out["npm"], [2]string{">=" + lo + " <4.0.0", v})
			out["cargo"] = append(out["cargo"], [2]string{">=" + lo + ", <4.0.0", v})
			out["pypi"] = append(out["pypi"], [2]string{">=" + lo + ",<4.0.0", v})
			out["deb"] = append(out["deb"], [2]string{"<= 1:" + lo, v})
		default:
			out["masterminds"] = append(out["masterminds"], [2]string{"=" + lo, v})
			out["npm"] = append(out["npm"], [2]string{"=" + lo, v})
			out["cargo"] = append(out["cargo"], [2]string{"=" + lo, v})
			out["pypi"] = append(out["pypi"], [2]string{"==" + lo, v})
			out["deb"] = append(out["deb"], [2]string{"= " + lo, v})
		}
	}
	return out
}

// resolverMastermindsMatch is the baseline: Masterminds/semver/v3 parsing the constraint and
// the version and checking one against the other.
func resolverMastermindsMatch(b *testing.B) {
	pairs := resolverPairs()["masterminds"]
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := pairs[i%len(pairs)]
		c, err := semver.NewConstraint(p[0])
		if err != nil {
			b.Fatal(err)
		}
		v, err := semver.NewVersion(p[1])
		if err != nil {
			b.Fatal(err)
		}
		c.Check(v)
	}
}

// BenchmarkResolverMatch measures resolver.Match (parse spec, parse version, match) per
// ecosystem, and reports each as a ratio to the Masterminds baseline, the first sub-benchmark of
// the same run.
func BenchmarkResolverMatch(b *testing.B) {
	var base float64
	b.Run("masterminds-baseline", func(b *testing.B) {
		resolverMastermindsMatch(b)
		base = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	pairs := resolverPairs()
	for _, eco := range []string{"npm", "cargo", "pypi", "deb"} {
		b.Run(eco, func(b *testing.B) {
			if base == 0 {
				b.Skip("the baseline did not run")
			}
			b.ReportAllocs()
			ps := pairs[eco]
			for i := 0; b.Loop(); i++ {
				p := ps[i%len(ps)]
				if _, err := resolver.Match(eco, p[0], p[1]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/base, "x-masterminds")
		})
	}
}

// resolverCandidates returns n versions, as a registry lists them, in each syntax.
func resolverCandidates(n int) map[string][]string {
	out := map[string][]string{}
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("%d.%d.%d", i/100, (i/10)%10, i%10)
		out["npm"] = append(out["npm"], v)
		out["cargo"] = append(out["cargo"], v)
		out["pypi"] = append(out["pypi"], v)
		out["deb"] = append(out["deb"], v+"-1")
		out["masterminds"] = append(out["masterminds"], v)
	}
	return out
}

// BenchmarkResolverBest measures resolver.Best over 500 candidates, against the baseline of
// Masterminds parsing the constraint and every candidate and keeping the highest match.
func BenchmarkResolverBest(b *testing.B) {
	cands := resolverCandidates(500)
	specs := map[string]string{"npm": "^3.1.0", "cargo": "3.1.0", "pypi": "~=3.1", "deb": "<< 3.5", "masterminds": "^3.1.0"}
	var baseNs float64
	b.Run("masterminds-baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := semver.NewConstraint(specs["masterminds"])
			if err != nil {
				b.Fatal(err)
			}
			var best *semver.Version
			for _, s := range cands["masterminds"] {
				v, err := semver.NewVersion(s)
				if err != nil || !c.Check(v) {
					continue
				}
				if best == nil || v.GreaterThan(best) {
					best = v
				}
			}
		}
		baseNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	for _, eco := range []string{"npm", "cargo", "pypi", "deb"} {
		b.Run(eco, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := resolver.Best(eco, specs[eco], cands[eco]); err != nil {
					b.Fatal(err)
				}
			}
			if baseNs == 0 {
				b.Skip("the baseline did not run")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/baseNs, "x-masterminds")
		})
	}
}
