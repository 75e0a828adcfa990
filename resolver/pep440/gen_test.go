package pep440

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// caseGen generates PEP 440 versions and specifiers deterministically, biased toward the edge
// cases: epochs, pre/post/dev combinations and their alternative spellings, local labels,
// leading zeros, "1.0" against "1.0.0", wildcards, "~=" with one component, huge numbers and
// white space.
type caseGen struct{ r *rand.Rand }

func newCaseGen(seed uint64) *caseGen { return &caseGen{rand.New(rand.NewPCG(seed, 0x440))} }

func (g *caseGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *caseGen) n() string {
	switch g.r.IntN(16) {
	case 0:
		return g.pick("00", "01", "007", "123456789012345678901234567890", "18446744073709551616")
	case 1, 2:
		return strconv.Itoa(g.r.IntN(20))
	}
	return strconv.Itoa(g.r.IntN(3))
}

func (g *caseGen) sep() string { return g.pick("", "", "", ".", "-", "_") }

func (g *caseGen) release() string {
	parts := []string{g.n()}
	for k := g.r.IntN(4); k > 0; k-- {
		parts = append(parts, g.n())
	}
	if g.r.IntN(6) == 0 {
		parts = append(parts, "0", "0")
	}
	return strings.Join(parts, ".")
}

func (g *caseGen) suffixes() string {
	var b strings.Builder
	if g.r.IntN(4) == 0 {
		b.WriteString(g.sep() + g.pick("a", "b", "rc", "c", "alpha", "beta", "pre", "preview", "A", "RC", "Alpha") + g.sep())
		if g.r.IntN(4) != 0 {
			b.WriteString(g.n())
		}
	}
	switch g.r.IntN(8) {
	case 0:
		b.WriteString("-" + g.n())
	case 1:
		b.WriteString(g.sep() + g.pick("post", "rev", "r", "POST") + g.sep())
		if g.r.IntN(3) != 0 {
			b.WriteString(g.n())
		}
	}
	if g.r.IntN(6) == 0 {
		b.WriteString(g.sep() + g.pick("dev", "DEV") + g.sep())
		if g.r.IntN(3) != 0 {
			b.WriteString(g.n())
		}
	}
	return b.String()
}

func (g *caseGen) local() string {
	if g.r.IntN(8) != 0 {
		return ""
	}
	parts := []string{g.pick("ubuntu", "1", "abc", "01", "Z", "deb10u1", "a1b2")}
	for k := g.r.IntN(3); k > 0; k-- {
		parts = append(parts, g.pick("1", "2", "x", "07", "abc", "B"))
	}
	return "+" + strings.Join(parts, g.pick(".", "-", "_"))
}

// version returns a version string, usually valid.
func (g *caseGen) version() string {
	if g.r.IntN(30) == 0 {
		return g.pick("", "v", "1.", ".1", "1..0", "1.0+", "1.0+a..b", "1.0-", "1.0a1a", "abc", "1.0 .1", "1.0\x00", "٣", "1.0+ſ", "1!", "!1", "1.0.post-1", "1.0.dev.a", "1.*", "1.0+abc_", "1.0-1-1")
	}
	var b strings.Builder
	if g.r.IntN(8) == 0 {
		b.WriteString(g.pick(" ", "\t", "\n", "\x1f", "\u00a0"))
	}
	if g.r.IntN(10) == 0 {
		b.WriteString(g.pick("v", "V"))
	}
	if g.r.IntN(8) == 0 {
		b.WriteString(g.pick("0", "1", "2", "00", "10") + "!")
	}
	b.WriteString(g.release())
	b.WriteString(g.suffixes())
	b.WriteString(g.local())
	if g.r.IntN(10) == 0 {
		b.WriteString(g.pick(" ", "\r\n", "\v"))
	}
	return b.String()
}

// clause returns one specifier clause.
func (g *caseGen) clause() string {
	op := g.pick("==", "==", "!=", "<=", ">=", "<", ">", "~=", "~=", "===", ">=", "<")
	sp := g.pick("", "", "", " ", "  ")
	switch g.r.IntN(12) {
	case 0:
		return g.pick("", "1.0", "=1.0", "~=1", "~= 1", "==1.*.1", ">=1.*", "== 1.0.*", "!=1.0.*", "==1.0+local", "<1.0+local", "===foo", "=== 1.0", "~=1.0.*", ">= 1 .0", "==1.0.*+x", "~=1.0+x", "=>1.0", "==v1.0", "~=v1.0", "~=1.0.DEV1", "==1.0A1.*")
	case 1:
		return op + sp + g.release() + ".*"
	}
	v := g.version()
	if op != "===" {
		v = strings.TrimSpace(v)
	}
	return op + sp + v
}

// spec returns a comma-separated specifier set.
func (g *caseGen) spec() string {
	var parts []string
	for k := g.r.IntN(3) + g.r.IntN(2); k >= 0; k-- {
		parts = append(parts, g.clause())
	}
	if g.r.IntN(10) == 0 {
		parts = append(parts, "")
	}
	return strings.Join(parts, g.pick(",", ", ", " ,"))
}

// near returns a version close to v: equal in another spelling, or one step away.
func (g *caseGen) near(v string) string {
	switch g.r.IntN(9) {
	case 0:
		return v + ".0"
	case 1:
		return v + g.pick("a1", "b2", "rc1", ".dev0", "a1.dev1")
	case 2:
		return v + g.pick(".post1", "-1", ".post0.dev1")
	case 3:
		return v + g.pick("+local", "+1", "+abc.2")
	case 4:
		return v + "." + g.n()
	case 5:
		if i := strings.LastIndexByte(v, '.'); i >= 0 {
			n, err := strconv.Atoi(v[i+1:])
			if err == nil {
				return v[:i+1] + strconv.Itoa(n+1-2*g.r.IntN(2))
			}
		}
	case 6:
		return "1!" + v
	}
	return v
}

// nearMatch returns a specifier set and a version close to its bounds.
func (g *caseGen) nearMatch() (string, string) {
	base := g.release()
	if g.r.IntN(3) == 0 {
		base += g.suffixes()
	}
	op := g.pick("==", "!=", "<=", ">=", "<", ">", "~=", "===")
	v := base
	if op == "~=" && !strings.Contains(v, ".") {
		v += ".0"
	}
	spec := op + v
	if op == "==" || op == "!=" {
		if g.r.IntN(3) == 0 {
			spec = op + g.release() + ".*"
			v = strings.TrimSuffix(spec[2:], ".*")
		}
	}
	if g.r.IntN(4) == 0 {
		spec += ", " + g.clause()
	}
	return spec, g.near(v)
}
