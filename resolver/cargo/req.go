package cargo

import (
	"fmt"
	"strconv"
	"strings"
)

// An Op is the operator of one comparator of a requirement.
type Op int

// The operators of Cargo requirements. Caret is the default (a bare "1.2.3"); Wildcard is a bare
// version with a "*", "x" or "X" in place of the minor or patch number ("1.*", "1.2.x").
const (
	Exact Op = iota
	Greater
	GreaterEq
	Less
	LessEq
	Tilde
	Caret
	Wildcard
)

var opText = map[Op]string{Exact: "=", Greater: ">", GreaterEq: ">=", Less: "<", LessEq: "<=", Tilde: "~", Caret: "^", Wildcard: ""}

// A Comparator is one operator and a possibly partial version.
type Comparator struct {
	Op           Op
	Major        uint64
	Minor, Patch *uint64 // nil when omitted or a wildcard
	Pre          []string
}

// A Req is a Cargo version requirement: comparators that must all match. An empty Req ("*")
// matches every version without a prerelease.
type Req struct {
	Comparators []Comparator
}

// ParseReq parses a Cargo version requirement as the semver crate does: a comma-separated list
// (at most 32) of comparators, each an optional operator (= > >= < <= ~ ^; none means ^) and a
// version whose minor and patch may be omitted or, without an operator or with one, be a
// wildcard (*, x, X); or a lone wildcard. Spaces are allowed around operators and commas; other
// white space is not. Errors wrap ErrInvalidReq.
func ParseReq(s string) (*Req, error) {
	text := strings.TrimLeft(s, " ")
	if rest, ok := wildcard(text); ok {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			return &Req{}, nil
		}
		return nil, fmt.Errorf("parsing requirement %q: wildcard must be the only comparator: %w", s, ErrInvalidReq)
	}
	r := &Req{}
	for {
		c, rest, err := parseComparator(text)
		if err != nil {
			return nil, fmt.Errorf("parsing requirement %q: %w", s, err)
		}
		r.Comparators = append(r.Comparators, c)
		if rest == "" {
			return r, nil
		}
		if rest[0] != ',' {
			return nil, fmt.Errorf("parsing requirement %q: expected ',' before %q: %w", s, rest, ErrInvalidReq)
		}
		if len(r.Comparators) == maxComparators {
			return nil, fmt.Errorf("parsing requirement %q: more than %d comparators: %w", s, maxComparators, ErrInvalidReq)
		}
		text = strings.TrimLeft(rest[1:], " ")
	}
}

func wildcard(s string) (string, bool) {
	if s != "" && (s[0] == '*' || s[0] == 'x' || s[0] == 'X') {
		return s[1:], true
	}
	return s, false
}

func parseOp(s string) (Op, string) {
	switch {
	case strings.HasPrefix(s, "="):
		return Exact, s[1:]
	case strings.HasPrefix(s, ">="):
		return GreaterEq, s[2:]
	case strings.HasPrefix(s, ">"):
		return Greater, s[1:]
	case strings.HasPrefix(s, "<="):
		return LessEq, s[2:]
	case strings.HasPrefix(s, "<"):
		return Less, s[1:]
	case strings.HasPrefix(s, "~"):
		return Tilde, s[1:]
	case strings.HasPrefix(s, "^"):
		return Caret, s[1:]
	}
	return Caret, s
}

func parseComparator(input string) (Comparator, string, error) {
	op, text := parseOp(input)
	defaultOp := len(text) == len(input)
	text = strings.TrimLeft(text, " ")
	var c Comparator
	var err error
	bad := func(err error) (Comparator, string, error) {
		return Comparator{}, "", fmt.Errorf("%v: %w", err, ErrInvalidReq)
	}
	if c.Major, text, err = numeric(text); err != nil {
		return bad(err)
	}
	hasWildcard := false
	if strings.HasPrefix(text, ".") {
		if rest, ok := wildcard(text[1:]); ok {
			hasWildcard = true
			if defaultOp {
				op = Wildcard
			}
			text = rest
		} else {
			var n uint64
			if n, text, err = numeric(text[1:]); err != nil {
				return bad(err)
			}
			c.Minor = &n
		}
	}
	if strings.HasPrefix(text, ".") {
		if rest, ok := wildcard(text[1:]); ok {
			if defaultOp {
				op = Wildcard
			}
			text = rest
		} else if hasWildcard {
			return bad(fmt.Errorf("unexpected number after wildcard"))
		} else {
			var n uint64
			if n, text, err = numeric(text[1:]); err != nil {
				return bad(err)
			}
			c.Patch = &n
		}
	}
	if c.Patch != nil && strings.HasPrefix(text, "-") {
		var pre string
		if pre, text, err = identifier(text[1:], true); err != nil || pre == "" {
			return bad(fmt.Errorf("bad prerelease"))
		}
		c.Pre = strings.Split(pre, ".")
	}
	if c.Patch != nil && strings.HasPrefix(text, "+") {
		var build string
		if build, text, err = identifier(text[1:], false); err != nil || build == "" {
			return bad(fmt.Errorf("bad build metadata"))
		}
	}
	c.Op = op
	return c, strings.TrimLeft(text, " "), nil
}

// Match reports whether v satisfies every comparator, with Cargo's prerelease rule: a version
// with a prerelease matches only if some comparator names a prerelease of the same
// major.minor.patch.
func (r *Req) Match(v *Version) bool {
	for _, c := range r.Comparators {
		if !c.matches(v) {
			return false
		}
	}
	if len(v.pre) == 0 {
		return true
	}
	for _, c := range r.Comparators {
		if c.Major == v.sv.Major() && c.Minor != nil && *c.Minor == v.sv.Minor() && c.Patch != nil && *c.Patch == v.sv.Patch() && len(c.Pre) > 0 {
			return true
		}
	}
	return false
}

func (c Comparator) matches(v *Version) bool {
	switch c.Op {
	case Exact, Wildcard:
		return c.exact(v)
	case Greater:
		return c.greater(v)
	case GreaterEq:
		return c.exact(v) || c.greater(v)
	case Less:
		return c.less(v)
	case LessEq:
		return c.exact(v) || c.less(v)
	case Tilde:
		return c.tilde(v)
	case Caret:
		return c.caret(v)
	}
	return false
}

func (c Comparator) exact(v *Version) bool {
	if v.sv.Major() != c.Major || c.Minor != nil && v.sv.Minor() != *c.Minor || c.Patch != nil && v.sv.Patch() != *c.Patch {
		return false
	}
	return comparePre(v.pre, c.Pre) == 0
}

func (c Comparator) greater(v *Version) bool {
	if v.sv.Major() != c.Major {
		return v.sv.Major() > c.Major
	}
	if c.Minor == nil {
		return false
	}
	if v.sv.Minor() != *c.Minor {
		return v.sv.Minor() > *c.Minor
	}
	if c.Patch == nil {
		return false
	}
	if v.sv.Patch() != *c.Patch {
		return v.sv.Patch() > *c.Patch
	}
	return comparePre(v.pre, c.Pre) > 0
}

func (c Comparator) less(v *Version) bool {
	if v.sv.Major() != c.Major {
		return v.sv.Major() < c.Major
	}
	if c.Minor == nil {
		return false
	}
	if v.sv.Minor() != *c.Minor {
		return v.sv.Minor() < *c.Minor
	}
	if c.Patch == nil {
		return false
	}
	if v.sv.Patch() != *c.Patch {
		return v.sv.Patch() < *c.Patch
	}
	return comparePre(v.pre, c.Pre) < 0
}

func (c Comparator) tilde(v *Version) bool {
	if v.sv.Major() != c.Major || c.Minor != nil && v.sv.Minor() != *c.Minor {
		return false
	}
	if c.Patch != nil && v.sv.Patch() != *c.Patch {
		return v.sv.Patch() > *c.Patch
	}
	return comparePre(v.pre, c.Pre) >= 0
}

func (c Comparator) caret(v *Version) bool {
	if v.sv.Major() != c.Major {
		return false
	}
	if c.Minor == nil {
		return true
	}
	minor := *c.Minor
	if c.Patch == nil {
		if c.Major > 0 {
			return v.sv.Minor() >= minor
		}
		return v.sv.Minor() == minor
	}
	patch := *c.Patch
	switch {
	case c.Major > 0:
		if v.sv.Minor() != minor {
			return v.sv.Minor() > minor
		}
		if v.sv.Patch() != patch {
			return v.sv.Patch() > patch
		}
	case minor > 0:
		if v.sv.Minor() != minor {
			return false
		}
		if v.sv.Patch() != patch {
			return v.sv.Patch() > patch
		}
	default:
		if v.sv.Minor() != minor || v.sv.Patch() != patch {
			return false
		}
	}
	return comparePre(v.pre, c.Pre) >= 0
}

// String returns the comparator in the semver crate's display form, e.g. "^1.2", ">=1.0.0-rc.1",
// "1.*".
func (c Comparator) String() string {
	var b strings.Builder
	b.WriteString(opText[c.Op])
	b.WriteString(strconv.FormatUint(c.Major, 10))
	switch {
	case c.Minor != nil:
		b.WriteString("." + strconv.FormatUint(*c.Minor, 10))
		if c.Patch != nil {
			b.WriteString("." + strconv.FormatUint(*c.Patch, 10))
			if len(c.Pre) > 0 {
				b.WriteString("-" + strings.Join(c.Pre, "."))
			}
		} else if c.Op == Wildcard {
			b.WriteString(".*")
		}
	case c.Op == Wildcard:
		b.WriteString(".*")
	}
	return b.String()
}

// String returns the requirement in the semver crate's display form ("*" when empty).
func (r *Req) String() string {
	if len(r.Comparators) == 0 {
		return "*"
	}
	parts := make([]string, len(r.Comparators))
	for i, c := range r.Comparators {
		parts[i] = c.String()
	}
	return strings.Join(parts, ", ")
}
