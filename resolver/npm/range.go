package npm

import (
	"fmt"
	"strings"
	"sync"
)

// setCache memoizes parsed comparator sets, as node-semver's range.js does (an LRU of 1000
// entries keyed by the options and the set's text). Parsed sets are never modified, so they are
// shared. When full, the cache is emptied. Sets longer than setCacheMaxLen bytes are not
// cached, so that untrusted input cannot make the cache hold much memory.
var setCache = struct {
	sync.Mutex
	m map[string][]comparator
}{m: map[string][]comparator{}}

const (
	setCacheMax    = 1000
	setCacheMaxLen = 256
)

// A comparator is one "<op><version>" of a comparator set; ANY (the empty comparator) matches
// everything.
type comparator struct {
	op    string // "", "<", "<=", ">", ">="
	v     *Version
	value string
}

func (c comparator) any() bool { return c.v == nil }

func (c comparator) test(v *Version) bool {
	if c.any() {
		return true
	}
	r := v.Compare(c.v)
	switch c.op {
	case "":
		return r == 0
	case ">":
		return r > 0
	case ">=":
		return r >= 0
	case "<":
		return r < 0
	case "<=":
		return r <= 0
	}
	return false
}

// A Range is a parsed node-semver range: a union ("||") of comparator sets.
type Range struct {
	raw  string
	set  [][]comparator
	opts Options
}

// ParseRange parses a range as new Range(s, opts) does: x-ranges (1.x, 1.2.*, *), tilde and
// caret ranges, hyphen ranges (with partial versions), primitive comparators and unions with
// "||". Build metadata in a range is ignored. With Loose (npm's mode) comparators that do not parse
// are dropped, as node-semver drops them. It returns an error wrapping ErrInvalidRange when no
// comparator set remains or a version in it is invalid.
func ParseRange(s string, opts Options) (*Range, error) {
	r := &Range{opts: opts}
	r.raw = reSpaces().ReplaceAllString(jsTrim(s), " ")
	for _, part := range strings.Split(r.raw, "||") {
		set, err := r.parseSet(jsTrim(part))
		if err != nil {
			return nil, fmt.Errorf("parsing range %q: %w", s, err)
		}
		if len(set) > 0 {
			r.set = append(r.set, set)
		}
	}
	if len(r.set) == 0 {
		return nil, fmt.Errorf("parsing range %q: %w", s, ErrInvalidRange)
	}
	if len(r.set) > 1 {
		first := r.set[0]
		var kept [][]comparator
		for _, c := range r.set {
			if !isNullSet(c[0]) {
				kept = append(kept, c)
			}
		}
		r.set = kept
		if len(r.set) == 0 {
			r.set = [][]comparator{first}
		} else if len(r.set) > 1 {
			for _, c := range r.set {
				if len(c) == 1 && c[0].any() {
					r.set = [][]comparator{c}
					break
				}
			}
		}
	}
	return r, nil
}

func isNullSet(c comparator) bool { return c.value == "<0.0.0-0" }

// String returns the range in node-semver's normalized form (Range.range).
func (r *Range) String() string {
	var b strings.Builder
	for i, set := range r.set {
		if i > 0 {
			b.WriteString("||")
		}
		for k, c := range set {
			if k > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(jsTrim(c.value))
		}
	}
	return b.String()
}

// Test reports whether v satisfies the range, with node-semver's prerelease rule: a version
// with a prerelease matches a comparator set only if one of its comparators has a prerelease on
// the same major.minor.patch, unless IncludePrerelease is set.
func (r *Range) Test(v *Version) bool {
	for _, set := range r.set {
		if r.testSet(set, v) {
			return true
		}
	}
	return false
}

func (r *Range) testSet(set []comparator, v *Version) bool {
	for _, c := range set {
		if !c.test(v) {
			return false
		}
	}
	if len(v.pre) == 0 || r.opts.IncludePrerelease {
		return true
	}
	for _, c := range set {
		if c.any() || len(c.v.pre) == 0 {
			continue
		}
		if c.v.major == v.major && c.v.minor == v.minor && c.v.patch == v.patch {
			return true
		}
	}
	return false
}

func (r *Range) parseSet(rng string) ([]comparator, error) {
	if len(rng) > setCacheMaxLen {
		return r.parseSetUncached(rng)
	}
	key := fmt.Sprintf("%t:%t:%s", r.opts.Loose, r.opts.IncludePrerelease, rng)
	setCache.Lock()
	cached, ok := setCache.m[key]
	setCache.Unlock()
	if ok {
		return cached, nil
	}
	set, err := r.parseSetUncached(rng)
	if err != nil {
		return nil, err
	}
	setCache.Lock()
	if len(setCache.m) >= setCacheMax {
		clear(setCache.m)
	}
	setCache.m[key] = set
	setCache.Unlock()
	return set, nil
}

func (r *Range) parseSetUncached(rng string) ([]comparator, error) {
	loose := r.opts.Loose
	rng = reBuildStrip().ReplaceAllString(rng, "")
	hr := reHyphenRange()
	if loose {
		hr = reHyphenLoose()
	}
	rng = replaceFirst(hr, rng, func(m []string) string { return hyphenReplace(m, r.opts.IncludePrerelease) })
	rng = reComparatorTrim().ReplaceAllString(rng, "${1}${2}${3}")
	rng = reTildeTrim().ReplaceAllString(rng, "${1}~")
	rng = reCaretTrim().ReplaceAllString(rng, "${1}^")

	parts := strings.Split(rng, " ")
	for i, p := range parts {
		parts[i] = r.parseComparator(p)
	}
	list := splitSpaces(strings.Join(parts, " "))
	gte0 := reGTE0()
	if r.opts.IncludePrerelease {
		gte0 = reGTE0Pre()
	}
	var comps []comparator
	for _, c := range list {
		c = replaceFirst(gte0, jsTrim(c), func([]string) string { return "" })
		if loose && !reComparatorLoose().MatchString(c) {
			continue
		}
		cmp, err := parseComparator(c, loose)
		if err != nil {
			return nil, err
		}
		comps = append(comps, cmp)
	}
	var out []comparator
	seen := map[string]int{}
	for _, c := range comps {
		if isNullSet(c) {
			return []comparator{c}, nil
		}
		if i, ok := seen[c.value]; ok {
			out[i] = c
			continue
		}
		seen[c.value] = len(out)
		out = append(out, c)
	}
	if len(out) > 1 {
		if i, ok := seen[""]; ok {
			out = append(out[:i:i], out[i+1:]...)
		}
	}
	return out, nil
}

// parseComparator is comparator.js's constructor and parse.
func parseComparator(s string, loose bool) (comparator, error) {
	s = strings.Join(splitSpaces(jsTrim(s)), " ")
	re := reComparator()
	if loose {
		re = reComparatorLoose()
	}
	m := re.FindStringSubmatch(s)
	if m == nil {
		return comparator{}, fmt.Errorf("invalid comparator %q: %w", s, ErrInvalidRange)
	}
	c := comparator{op: m[1]}
	if c.op == "=" {
		c.op = ""
	}
	if m[2] == "" {
		return comparator{}, nil
	}
	v, err := ParseVersion(m[2], Options{Loose: loose})
	if err != nil {
		return comparator{}, fmt.Errorf("invalid comparator %q: %w", s, ErrInvalidRange)
	}
	c.v = v
	c.value = c.op + v.version
	return c, nil
}

func isX(id string) bool { return id == "" || strings.ToLower(id) == "x" || id == "*" }

func (r *Range) parseComparator(comp string) string {
	comp = replaceFirst(reBuild(), comp, func([]string) string { return "" })
	comp = r.replaceEach(jsTrim(comp), r.replaceCaret)
	comp = r.replaceEach(jsTrim(comp), r.replaceTilde)
	comp = r.replaceEach(comp, r.replaceXRange)
	return replaceFirst(reStar(), jsTrim(comp), func([]string) string { return "" })
}

func (r *Range) replaceEach(comp string, f func(string) string) string {
	parts := splitSpaces(comp)
	for i, p := range parts {
		parts[i] = f(p)
	}
	return strings.Join(parts, " ")
}

func (r *Range) z() string {
	if r.opts.IncludePrerelease {
		return "-0"
	}
	return ""
}

func (r *Range) replaceTilde(comp string) string {
	re := reTilde()
	if r.opts.Loose {
		re = reTildeLoose()
	}
	z := r.z()
	return replaceFirst(re, comp, func(g []string) string {
		M, m, p, pr := g[1], g[2], g[3], g[4]
		switch {
		case isX(M):
			return ""
		case isX(m):
			return ">=" + M + ".0.0" + z + " <" + jsIncr(M) + ".0.0-0"
		case isX(p):
			return ">=" + M + "." + m + ".0" + z + " <" + M + "." + jsIncr(m) + ".0-0"
		case pr != "":
			return ">=" + M + "." + m + "." + p + "-" + pr + " <" + M + "." + jsIncr(m) + ".0-0"
		}
		return ">=" + M + "." + m + "." + p + " <" + M + "." + jsIncr(m) + ".0-0"
	})
}

func (r *Range) replaceCaret(comp string) string {
	re := reCaret()
	if r.opts.Loose {
		re = reCaretLoose()
	}
	z := r.z()
	return replaceFirst(re, comp, func(g []string) string {
		M, m, p, pr := g[1], g[2], g[3], g[4]
		switch {
		case isX(M):
			return ""
		case isX(m):
			return ">=" + M + ".0.0" + z + " <" + jsIncr(M) + ".0.0-0"
		case isX(p):
			if M == "0" {
				return ">=" + M + "." + m + ".0" + z + " <" + M + "." + jsIncr(m) + ".0-0"
			}
			return ">=" + M + "." + m + ".0" + z + " <" + jsIncr(M) + ".0.0-0"
		}
		from := ">=" + M + "." + m + "." + p
		if pr != "" {
			from += "-" + pr
		}
		switch {
		case M == "0" && m == "0":
			return from + " <" + M + "." + m + "." + jsIncr(p) + "-0"
		case M == "0":
			return from + " <" + M + "." + jsIncr(m) + ".0-0"
		}
		return from + " <" + jsIncr(M) + ".0.0-0"
	})
}

func (r *Range) replaceXRange(comp string) string {
	comp = jsTrim(comp)
	re := reXRange()
	if r.opts.Loose {
		re = reXRangeLoose()
	}
	return replaceFirst(re, comp, func(g []string) string {
		ret, gtlt, M, m, p := g[0], g[1], g[2], g[3], g[4]
		if (isX(M) && !isX(m)) || (isX(m) && p != "" && !isX(p)) {
			return comp
		}
		xM := isX(M)
		xm := xM || isX(m)
		xp := xm || isX(p)
		anyX := xp
		if gtlt == "=" && anyX {
			gtlt = ""
		}
		pr := r.z()
		switch {
		case xM:
			if gtlt == ">" || gtlt == "<" {
				return "<0.0.0-0"
			}
			return "*"
		case gtlt != "" && anyX:
			if xm {
				m = "0"
			}
			p = "0"
			switch gtlt {
			case ">":
				gtlt = ">="
				if xm {
					M, m, p = jsIncr(M), "0", "0"
				} else {
					m, p = jsIncr(m), "0"
				}
			case "<=":
				gtlt = "<"
				if xm {
					M = jsIncr(M)
				} else {
					m = jsIncr(m)
				}
			}
			if gtlt == "<" {
				pr = "-0"
			}
			return gtlt + M + "." + m + "." + p + pr
		case xm:
			return ">=" + M + ".0.0" + pr + " <" + jsIncr(M) + ".0.0-0"
		case xp:
			return ">=" + M + "." + m + ".0" + pr + " <" + M + "." + jsIncr(m) + ".0-0"
		}
		return ret
	})
}

// hyphenReplace is range.js's hyphenReplace; m holds the groups of HYPHENRANGE(LOOSE).
func hyphenReplace(g []string, incPr bool) string {
	z := ""
	if incPr {
		z = "-0"
	}
	// Groups: 1 from, 2-4 fM fm fp, 5 fpr, 6 fb, 7 to, 8-10 tM tm tp, 11 tpr, 12 tb.
	from, fM, fm, fp, fpr := g[1], g[2], g[3], g[4], g[5]
	to, tM, tm, tp, tpr := g[7], g[8], g[9], g[10], g[11]
	switch {
	case isX(fM):
		from = ""
	case isX(fm):
		from = ">=" + fM + ".0.0" + z
	case isX(fp):
		from = ">=" + fM + "." + fm + ".0" + z
	case fpr != "":
		from = ">=" + from
	default:
		from = ">=" + from + z
	}
	switch {
	case isX(tM):
		to = ""
	case isX(tm):
		to = "<" + jsIncr(tM) + ".0.0-0"
	case isX(tp):
		to = "<" + tM + "." + jsIncr(tm) + ".0-0"
	case tpr != "":
		to = "<=" + tM + "." + tm + "." + tp + "-" + tpr
	case incPr:
		to = "<" + tM + "." + tm + "." + jsIncr(tp) + "-0"
	default:
		to = "<=" + to
	}
	return jsTrim(from + " " + to)
}
