package deb

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// caseGen generates Debian versions deterministically, biased toward the edge cases: epochs
// (including malformed ones), tildes, letters against digits, leading zeros, empty and missing
// revisions, '+', '.', '-' and ':' in the upstream part, and white space.
type caseGen struct{ r *rand.Rand }

func newCaseGen(seed uint64) *caseGen { return &caseGen{rand.New(rand.NewPCG(seed, 0xdeb))} }

func (g *caseGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *caseGen) chunk(alphabet string, n int) string {
	var b strings.Builder
	for range n {
		if g.r.IntN(3) == 0 {
			b.WriteString(g.pick("~", ".", "+", "0", "1", "~~", "a", "A", "z"))
			continue
		}
		b.WriteByte(alphabet[g.r.IntN(len(alphabet))])
	}
	return b.String()
}

func (g *caseGen) version() string {
	if g.r.IntN(30) == 0 {
		return g.pick("", " ", "a", "1.0-", "1:", ":1", "1 0", "1.0_1", "1.0-a_b", "1.0-1:2", "-1", "1.0!", "1:-1", "1.0-~", "\t1.0", "1.0 ", "2147483648:1", "2147483647:1", "-0:1", "+1:1", "x:1", "1.0-1-2", "é1")
	}
	var b strings.Builder
	if g.r.IntN(5) == 0 {
		b.WriteString(g.pick("0:", "1:", "2:", "00:", "1:", "10:"))
	}
	b.WriteString(g.pick("0", "1", "2", "9", "10", "01", "007", "1"))
	b.WriteString(g.chunk("0123456789.+~abcxyzABZ", g.r.IntN(6)))
	if g.r.IntN(8) == 0 && strings.Contains(b.String(), ":") {
		b.WriteString(":" + g.chunk("0123456789", 1))
	}
	switch g.r.IntN(4) {
	case 0, 1:
		b.WriteString("-" + g.pick("1", "0", "2", "1ubuntu1", "0.1", "1~bpo1", "10", "01", "1+b1") + g.chunk("0123456789.+~ab", g.r.IntN(3)))
	case 2:
		if g.r.IntN(3) == 0 {
			b.WriteString("-" + g.chunk("0123456789.~", 1) + "-" + g.chunk("0123456789", 1)) // a '-' in the upstream part
		}
	}
	return b.String()
}

// mutate returns a version close to v.
func (g *caseGen) mutate(v string) string {
	switch g.r.IntN(8) {
	case 0:
		return v + g.pick("~", "~1", "+1", ".0", "a", "0")
	case 1:
		if len(v) > 1 {
			return v[:len(v)-1]
		}
	case 2:
		return "0:" + v
	case 3:
		return strings.Replace(v, "0", "00", 1)
	case 4:
		return strings.Replace(v, "~", "", 1)
	case 5:
		return v + "-" + g.pick("1", "0", "~")
	}
	return g.version()
}

var ops = []string{"<<", "<=", "=", ">=", ">>", "<", ">"}

// knownDifference returns why a case may differ from dpkg, or "". Each reason is explained in
// docs/resolver.md ("Debian: differences"); any other difference fails the test.
func knownDifference(a, b string) string {
	if strings.TrimSpace(a) == "" || strings.TrimSpace(b) == "" {
		// dpkg --compare-versions reads an empty argument as "no version", lower than any
		// version; Parse rejects it.
		return "empty version"
	}
	return ""
}

// TestDifferentialDpkg checks Parse, Compare and Relation.Match against dpkg --compare-versions.
func TestDifferentialDpkg(t *testing.T) {
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Skip("dpkg is not installed: the differential test needs dpkg --compare-versions as the oracle")
	}
	g := newCaseGen(1)
	type tc struct{ a, b, op string }
	var cases []tc
	var in bytes.Buffer
	for i := 0; i < 1100; i++ {
		a := g.version()
		b := g.mutate(a)
		if i%3 == 0 {
			b = g.version()
		}
		c := tc{a, b, ops[g.r.IntN(len(ops))]}
		cases = append(cases, c)
		fmt.Fprintf(&in, "%s\x00%s\x00%s\x00", c.a, c.b, c.op)
	}
	cmd := exec.Command("bash", filepath.Join("testdata", "oracle.sh"))
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("running dpkg oracle: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	var diffs, invalid, allowed int
	for i, c := range cases {
		if !sc.Scan() {
			t.Fatalf("oracle output ended after %d of %d cases", i, len(cases))
		}
		var lt, gt, rel, bad int
		if _, err := fmt.Sscanf(sc.Text(), "%d %d %d %d", &lt, &gt, &rel, &bad); err != nil {
			t.Fatalf("oracle line %q: %v", sc.Text(), err)
		}
		if why := knownDifference(c.a, c.b); why != "" {
			allowed++
			if _, err := Parse(c.a); err == nil && strings.TrimSpace(c.a) == "" {
				t.Errorf("Parse(%q) succeeded, want error (%s)", c.a, why)
			}
			continue
		}
		va, ea := Parse(c.a)
		vb, eb := Parse(c.b)
		gotBad := ea != nil || eb != nil
		if gotBad != (bad == 1) {
			diffs++
			t.Errorf("Parse(%q), Parse(%q) = %v, %v; dpkg bad syntax = %v", c.a, c.b, ea, eb, bad == 1)
			continue
		}
		if gotBad {
			invalid++
			continue
		}
		want := 0
		switch {
		case lt == 0:
			want = -1
		case gt == 0:
			want = 1
		}
		if got := va.Compare(vb); got != want {
			diffs++
			t.Errorf("Compare(%q, %q) = %d, want %d (dpkg)", c.a, c.b, got, want)
		}
		r, err := ParseRelation(c.op + " " + c.b)
		if err != nil {
			diffs++
			t.Errorf("ParseRelation(%q) = %v", c.op+" "+c.b, err)
			continue
		}
		if got := r.Match(va); got != (rel == 0) {
			diffs++
			t.Errorf("ParseRelation(%q).Match(%q) = %v, dpkg says %v", c.op+" "+c.b, c.a, got, rel == 0)
		}
	}
	t.Logf("%d cases (%d with bad syntax), %d differences, %d cases with a documented difference", len(cases), invalid, diffs, allowed)
}
