package sigma

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// tok is one piece of a Sigma string: a literal run, or the wildcard *
// or ? (wild is then '*' or '?').
type tok struct {
	lit  string
	wild byte
}

// parseSigmaString splits a plain Sigma value into literals and
// wildcards. A backslash escapes *, ? and itself; before any other
// character it is a plain backslash.
func parseSigmaString(s string) []tok {
	var out []tok
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			out = append(out, tok{lit: b.String()})
			b.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && (s[i+1] == '*' || s[i+1] == '?' || s[i+1] == '\\'):
			b.WriteByte(s[i+1])
			i++
		case c == '*' || c == '?':
			flush()
			out = append(out, tok{wild: c})
		default:
			b.WriteByte(c)
		}
	}
	flush()
	return out
}

func hasWild(ts []tok) bool {
	for _, t := range ts {
		if t.wild != 0 {
			return true
		}
	}
	return false
}

func literal(ts []tok) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.lit)
	}
	return b.String()
}

// matcher tests one value of a field. match gets the field's raw text and
// its lower-cased text (the same string when the item is cased); matchNum
// gets an integer or boolean field's number.
type matcher interface {
	match(v *view, raw, low string) bool
	matchNum(v *view, n int64) bool
}

// String match modes, chosen at load from the pattern's shape.
const (
	modeEq uint8 = iota
	modePrefix
	modeSuffix
	modeContains
	modeAny
	modeGlob
)

// strMatcher matches a Sigma string: a literal, a prefix, a suffix, a
// substring or a general wildcard pattern.
type strMatcher struct {
	mode    uint8
	lit     string
	glob    [][]tok // segments between stars; each holds literals and ?
	start   bool    // the pattern does not begin with *
	end     bool    // the pattern does not end with *
	cased   bool
	windash bool
}

func newStrMatcher(ts []tok, cased, windash bool) *strMatcher {
	m := &strMatcher{cased: cased, windash: windash}
	norm := func(s string) string {
		if !cased {
			s = strings.ToLower(s)
		}
		if windash {
			s = dashNorm(s)
		}
		return s
	}
	// Merge adjacent literals and runs of stars.
	var c []tok
	for _, t := range ts {
		if t.wild == 0 {
			t.lit = norm(t.lit)
			if len(c) > 0 && c[len(c)-1].wild == 0 {
				c[len(c)-1].lit += t.lit
				continue
			}
		} else if t.wild == '*' && len(c) > 0 && c[len(c)-1].wild == '*' {
			continue
		}
		c = append(c, t)
	}
	q := false
	for _, t := range c {
		q = q || t.wild == '?'
	}
	star := func(i int) bool { return i >= 0 && i < len(c) && c[i].wild == '*' }
	switch {
	case len(c) == 0:
		m.mode = modeEq
	case len(c) == 1 && star(0):
		m.mode = modeAny
	case !q && len(c) == 1:
		m.mode, m.lit = modeEq, c[0].lit
	case !q && len(c) == 2 && star(1):
		m.mode, m.lit = modePrefix, c[0].lit
	case !q && len(c) == 2 && star(0):
		m.mode, m.lit = modeSuffix, c[1].lit
	case !q && len(c) == 3 && star(0) && star(2):
		m.mode, m.lit = modeContains, c[1].lit
	default:
		m.mode = modeGlob
		m.start, m.end = !star(0), !star(len(c)-1)
		var seg []tok
		for _, t := range c {
			if t.wild == '*' {
				if seg != nil {
					m.glob = append(m.glob, seg)
				}
				seg = nil
				continue
			}
			seg = append(seg, t)
		}
		if seg != nil {
			m.glob = append(m.glob, seg)
		}
	}
	return m
}

func (m *strMatcher) match(_ *view, raw, low string) bool {
	s := low
	if m.cased {
		s = raw
	}
	if m.windash {
		s = dashNorm(s)
	}
	switch m.mode {
	case modeEq:
		return s == m.lit
	case modePrefix:
		return strings.HasPrefix(s, m.lit)
	case modeSuffix:
		return strings.HasSuffix(s, m.lit)
	case modeContains:
		return strings.Contains(s, m.lit)
	case modeAny:
		return true
	}
	return m.globMatch(s)
}

func (m *strMatcher) matchNum(v *view, n int64) bool {
	s := formatInt(n)
	return m.match(v, s, s)
}

// globMatch matches the general pattern: the first segment at the start
// (unless the pattern begins with *), the last at the end (unless it ends
// with *), the others leftmost in between, which is exact for patterns
// whose only variable-length wildcard is *.
func (m *strMatcher) globMatch(s string) bool {
	segs := m.glob
	i := 0
	if m.start {
		end, ok := segAt(s, 0, segs[0])
		if !ok {
			return false
		}
		if len(segs) == 1 && m.end {
			return end == len(s)
		}
		i, segs = end, segs[1:]
	}
	var last []tok
	if m.end && len(segs) > 0 {
		last, segs = segs[len(segs)-1], segs[:len(segs)-1]
	}
	for _, seg := range segs {
		end, ok := findSeg(s, i, seg)
		if !ok {
			return false
		}
		i = end
	}
	if last == nil {
		return true
	}
	for st := len(s); st >= i; st-- {
		if st < len(s) && !utf8.RuneStart(s[st]) {
			continue
		}
		if end, ok := segAt(s, st, last); ok && end == len(s) {
			return true
		}
	}
	return false
}

// segAt matches seg at s[i:], returning where it ends.
func segAt(s string, i int, seg []tok) (int, bool) {
	for _, t := range seg {
		if t.wild == '?' {
			if i >= len(s) {
				return 0, false
			}
			_, n := utf8.DecodeRuneInString(s[i:])
			i += n
			continue
		}
		if !strings.HasPrefix(s[i:], t.lit) {
			return 0, false
		}
		i += len(t.lit)
	}
	return i, true
}

// findSeg finds the leftmost match of seg in s at or after from.
func findSeg(s string, from int, seg []tok) (int, bool) {
	for st := from; st <= len(s); {
		if seg[0].wild == 0 {
			j := strings.Index(s[st:], seg[0].lit)
			if j < 0 {
				return 0, false
			}
			st += j
		}
		if end, ok := segAt(s, st, seg); ok {
			return end, true
		}
		if st == len(s) {
			break
		}
		_, n := utf8.DecodeRuneInString(s[st:])
		st += n
	}
	return 0, false
}

// dashNorm maps the characters windash makes interchangeable to '-'.
// strings.Map returns s itself when nothing changes.
func dashNorm(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '/', '–', '—', '―':
			return '-'
		}
		return r
	}, s)
}

// reMatcher is the re modifier: a Go RE2 regular expression, matched
// case-sensitively unless re|i.
type reMatcher struct{ re *regexp.Regexp }

func (m *reMatcher) match(_ *view, raw, _ string) bool { return m.re.MatchString(raw) }

func (m *reMatcher) matchNum(_ *view, n int64) bool { return m.re.MatchString(formatInt(n)) }

// cidrMatcher is the cidr modifier: the field's text is an address inside
// the prefix. An IPv4-mapped IPv6 address is taken as IPv4.
type cidrMatcher struct{ p netip.Prefix }

func (m *cidrMatcher) match(_ *view, raw, _ string) bool {
	a, err := netip.ParseAddr(raw)
	if err != nil {
		return false
	}
	return m.p.Contains(a.Unmap().WithZone(""))
}

func (m *cidrMatcher) matchNum(*view, int64) bool { return false }

// cmpOp is a numeric comparison.
type cmpOp uint8

const (
	cmpEq cmpOp = iota
	cmpLt
	cmpLte
	cmpGt
	cmpGte
)

func (op cmpOp) test(a, b int64) bool {
	switch op {
	case cmpLt:
		return a < b
	case cmpLte:
		return a <= b
	case cmpGt:
		return a > b
	case cmpGte:
		return a >= b
	}
	return a == b
}

// numMatcher compares a number: an integer field's value, or a string
// field's text read as a decimal integer (text that is not one never
// matches).
type numMatcher struct {
	op cmpOp
	n  int64
}

func (m *numMatcher) match(_ *view, raw, _ string) bool {
	n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	return err == nil && m.op.test(n, m.n)
}

func (m *numMatcher) matchNum(_ *view, n int64) bool { return m.op.test(n, m.n) }

// refMatcher is the fieldref modifier: the field equals another field of
// the same event (case-insensitively unless cased).
type refMatcher struct {
	ref   *field
	cased bool
}

func (m *refMatcher) equal(a, b string) bool {
	if m.cased {
		return a == b
	}
	return strings.EqualFold(a, b)
}

func (m *refMatcher) match(v *view, raw, _ string) bool {
	o := m.ref.get(v)
	if !o.present {
		return false
	}
	switch m.ref.typ {
	case tStrs:
		for _, s := range o.list {
			if m.equal(raw, s) {
				return true
			}
		}
		return false
	case tInt, tBool:
		return m.equal(raw, formatInt(o.n))
	}
	return m.equal(raw, o.s)
}

func (m *refMatcher) matchNum(v *view, n int64) bool {
	o := m.ref.get(v)
	if !o.present {
		return false
	}
	if m.ref.typ == tInt || m.ref.typ == tBool {
		return o.n == n
	}
	return m.match(v, formatInt(n), "")
}
