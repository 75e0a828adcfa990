package pep440

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/resolver/internal/oracletest"
)

type oracleCase struct {
	Kind       string   `json:"kind"`
	A          string   `json:"a"`
	B          string   `json:"b"`
	Spec       string   `json:"spec"`
	Version    string   `json:"version"`
	Candidates []string `json:"candidates"`
}

type oracleResult struct {
	ValidA       bool   `json:"valid_a"`
	ValidB       bool   `json:"valid_b"`
	Cmp          int    `json:"cmp"`
	StrA         string `json:"str_a"`
	ValidSpec    bool   `json:"valid_spec"`
	Str          string `json:"str"`
	ValidVersion bool   `json:"valid_version"`
	Match        bool   `json:"match"`
	Best         int    `json:"best"`
}

// knownDifference returns why a case may differ from pip's packaging, or "". Each reason is
// explained in docs/resolver.md ("PEP 440: differences"); any other difference fails the test.
func knownDifference(inputs ...string) string {
	for _, s := range inputs {
		// Python's re.IGNORECASE lets [a-z] match these four non-ASCII letters, so packaging
		// accepts "1.0+ſ"; this package rejects every non-ASCII character but white space.
		if strings.ContainsAny(s, "\u0130\u0131\u017f\u212a") {
			return "non-ASCII letter"
		}
	}
	return ""
}

func runOracle(t *testing.T, cases []oracleCase) []oracleResult {
	t.Helper()
	if err := exec.Command("python3", "-c", "import pip._vendor.packaging.specifiers").Run(); err != nil {
		t.Skipf("python3 with pip is not available (%v): the differential test needs pip's vendored packaging as the oracle", err)
	}
	return oracletest.Run[oracleCase, oracleResult](t, cases, "python3", filepath.Join("testdata", "oracle.py"))
}

// TestDifferentialPackaging checks version parsing, normalization and ordering, specifier set
// parsing, contains, and pip's pick among candidates against pip's vendored packaging.
func TestDifferentialPackaging(t *testing.T) {
	g := newCaseGen(1)
	var cases []oracleCase
	for i := 0; i < 2000; i++ {
		a, b := g.version(), g.version()
		switch i % 8 {
		case 0, 4:
			b = a + g.pick(".0", ".0.0", "0", "")
		case 1:
			base := g.release() + g.suffixes()
			a, b = base+"+"+g.pick("1", "a", "1.a", "a.1", "01", "abc.1.2", "1-b"), base+"+"+g.pick("1", "2", "b", "a.2", "1.1", "abc.01.2")
		}
		cases = append(cases, oracleCase{Kind: "compare", A: a, B: b})
	}
	for i := 0; i < 3000; i++ {
		cases = append(cases, oracleCase{Kind: "match", Spec: g.spec(), Version: g.version()})
	}
	for i := 0; i < 2000; i++ {
		spec, v := g.nearMatch()
		cases = append(cases, oracleCase{Kind: "match", Spec: spec, Version: v})
	}
	for i := 0; i < 1000; i++ {
		var cands []string
		for k := 1 + g.r.IntN(8); k > 0; k-- {
			cands = append(cands, g.version())
		}
		cases = append(cases, oracleCase{Kind: "best", Spec: g.pick("", "", g.clause(), g.spec()), Candidates: cands})
	}
	res := runOracle(t, cases)
	var diffs, valid, matched, picked, allowed int
	for i, c := range cases {
		want := res[i]
		inputs := append([]string{c.A, c.B, c.Spec, c.Version}, c.Candidates...)
		if why := knownDifference(inputs...); why != "" {
			// The difference must be exactly the documented one: this package rejects the
			// input that carries the character.
			for _, in := range inputs {
				if knownDifference(in) == "" {
					continue
				}
				_, verr := Parse(in)
				_, serr := ParseSpecifiers(in)
				if verr == nil || serr == nil {
					t.Errorf("input %q (%s) parsed, want an error", in, why)
				}
			}
			allowed++
			continue
		}
		switch c.Kind {
		case "compare":
			a, ea := Parse(c.A)
			b, eb := Parse(c.B)
			got, str := 0, ""
			if ea == nil {
				str = a.String()
			}
			if ea == nil && eb == nil {
				got = a.Compare(b)
			}
			if (ea == nil) != want.ValidA || (eb == nil) != want.ValidB || got != want.Cmp || str != want.StrA {
				diffs++
				t.Errorf("Compare(%q, %q) = (valid %v %v, %d, %q), packaging (valid %v %v, %d, %q)", c.A, c.B, ea == nil, eb == nil, got, str, want.ValidA, want.ValidB, want.Cmp, want.StrA)
			}
		case "match":
			s, serr := ParseSpecifiers(c.Spec)
			v, verr := Parse(c.Version)
			got, str := false, ""
			if serr == nil {
				str = s.String()
				valid++
				got = verr == nil && s.Contains(v)
			}
			if got {
				matched++
			}
			if (serr == nil) != want.ValidSpec || str != want.Str || (verr == nil) != want.ValidVersion || got != want.Match {
				diffs++
				t.Errorf("SpecifierSet(%q).contains(%q) = (valid %v %q, %v, %v), packaging (%v %q, %v, %v)", c.Spec, c.Version, serr == nil, str, verr == nil, got, want.ValidSpec, want.Str, want.ValidVersion, want.Match)
			}
		case "best":
			s, serr := ParseSpecifiers(c.Spec)
			got := -1
			if serr == nil {
				var vs []*Version
				var idx []int
				for j, cand := range c.Candidates {
					if v, err := Parse(cand); err == nil {
						vs = append(vs, v)
						idx = append(idx, j)
					}
				}
				if b := s.Best(vs); b >= 0 {
					got = idx[b]
					picked++
				}
			}
			if (serr == nil) != want.ValidSpec || got != want.Best {
				diffs++
				t.Errorf("Best(%q, %q) = (valid %v, %d), pip (%v, %d)", c.Spec, c.Candidates, serr == nil, got, want.ValidSpec, want.Best)
			}
		}
	}
	t.Logf("%d cases (%d valid specifier sets, %d matches, %d picks), %d differences, %d cases with a documented difference", len(cases), valid, matched, picked, diffs, allowed)
}
