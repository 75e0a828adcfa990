package npm

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// caseGen generates node-semver versions and ranges deterministically, biased toward the edge
// cases: x-ranges, partial hyphen ranges, ||, ^0.0.x, prereleases, build metadata, loose forms,
// leading zeros, numbers at 2^53, stray white space and garbage.
type caseGen struct{ r *rand.Rand }

func newCaseGen(seed uint64) *caseGen { return &caseGen{rand.New(rand.NewPCG(seed, 0x5eed))} }

func (g *caseGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *caseGen) num() string {
	switch g.r.IntN(20) {
	case 0:
		return g.pick("9007199254740991", "9007199254740992", "99999999999999999999999", "00", "01", "010")
	case 1, 2:
		return strconv.Itoa(g.r.IntN(12))
	}
	return strconv.Itoa(g.r.IntN(3))
}

func (g *caseGen) xnum() string {
	if g.r.IntN(6) == 0 {
		return g.pick("x", "X", "*")
	}
	return g.num()
}

func (g *caseGen) pre() string {
	switch g.r.IntN(12) {
	case 0:
		return "-" + g.pick("alpha", "beta", "rc", "0", "1", "alpha.1", "alpha.beta", "rc.01", "01", "-", "x.7.z.92", "9007199254740992", "1a", "beta.11", "beta.2")
	case 1:
		return g.pick("alpha", "beta1", "-rc.1", ".1", "-a..b", "-") // loose-only or invalid
	case 2:
		return "-" + g.pick("alpha", "beta", "0")
	}
	return ""
}

func (g *caseGen) build() string {
	if g.r.IntN(10) == 0 {
		return "+" + g.pick("build", "build.1", "001", "exp.sha.5114f85", "a..b", "")
	}
	return ""
}

func (g *caseGen) prefix() string {
	if g.r.IntN(8) == 0 {
		return g.pick("v", "=", "v=", "=v", " ", "V", "vv", "==")
	}
	return ""
}

// version returns a version string, usually valid.
func (g *caseGen) version() string {
	if g.r.IntN(40) == 0 {
		return g.pick("", "1", "1.2", "1.2.3.4", "a.b.c", "1.2.3-", "1.2.3 ", " 1.2.3", "1.2.3\t", "v1.2.3", strings.Repeat("1", 300)+".0.0", "1.2.3-"+strings.Repeat("a", 260))
	}
	return g.prefix() + g.num() + "." + g.num() + "." + g.num() + g.pre() + g.build()
}

// partial returns a possibly partial, possibly x-ed version.
func (g *caseGen) partial() string {
	switch g.r.IntN(4) {
	case 0:
		return g.prefix() + g.xnum()
	case 1:
		return g.prefix() + g.xnum() + "." + g.xnum()
	}
	return g.prefix() + g.xnum() + "." + g.xnum() + "." + g.xnum() + g.pre() + g.build()
}

func (g *caseGen) sp() string {
	if g.r.IntN(6) == 0 {
		return g.pick(" ", "  ", "\t", "")
	}
	return ""
}

func (g *caseGen) comparator() string {
	switch g.r.IntN(14) {
	case 0:
		return g.partial() + " - " + g.partial()
	case 1:
		return g.pick("*", "x", "", "latest", "foo", ">=*", "<*", "1.2.3.4", "^0.0.x", "^0.0", "^0.x", "~0.0.x", "~>1.2", ">=0.0.0", ">=0.0.0-0", "<0.0.0-0", "^v1.2.3", "= 1.2.3", "> =1.2.3", "1 -2", "1.2 -2.3", "1.2.3-2.3.4")
	}
	op := g.pick("", "", "", "=", "<", ">", "<=", ">=", "~", "~>", "^", "^", "~")
	return op + g.sp() + g.partial()
}

// rangeStr returns a range: comparators joined by spaces, sets joined by ||.
func (g *caseGen) rangeStr() string {
	var sets []string
	for n := 1 + g.r.IntN(3)/2 + g.r.IntN(2)*g.r.IntN(2); n > 0; n-- {
		var comps []string
		for k := 1 + g.r.IntN(2) + g.r.IntN(2)*g.r.IntN(2); k > 0; k-- {
			comps = append(comps, g.comparator())
		}
		sets = append(sets, strings.Join(comps, " "))
	}
	return g.sp() + strings.Join(sets, g.pick(" || ", "||", " ||", "|| ")) + g.sp()
}
