package deb

import (
	"fmt"
	"strings"
)

// An Op is a dpkg/apt version relation.
type Op string

// The relations of Debian's Depends fields and of dpkg --compare-versions.
const (
	Less         Op = "<<"
	LessEqual    Op = "<="
	Equal        Op = "="
	GreaterEqual Op = ">="
	Greater      Op = ">>"
)

// A Relation is a version constraint such as ">= 1.2-1" or "<< 2:1.0". The zero Relation (parsed
// from "") matches every version.
type Relation struct {
	Op      Op
	Version Version
	any     bool
}

// ParseRelation parses an apt/dpkg version relation: an operator (<< <= = >= >>), optional
// white space and a version, optionally wrapped in parentheses as in a Depends field
// ("(>= 1.2-1)"). The obsolete operators "<" and ">" mean "<=" and ">=", as in dpkg. A bare
// version means "=". An empty string matches any version. Errors wrap ErrSyntax.
func ParseRelation(s string) (Relation, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return Relation{any: true}, nil
	}
	if strings.HasPrefix(t, "(") {
		if !strings.HasSuffix(t, ")") {
			return Relation{}, fmt.Errorf("parsing relation %q: unbalanced parenthesis: %w", s, ErrSyntax)
		}
		t = strings.TrimSpace(t[1 : len(t)-1])
	}
	op := Equal
	switch {
	case strings.HasPrefix(t, "<<"):
		op, t = Less, t[2:]
	case strings.HasPrefix(t, "<="):
		op, t = LessEqual, t[2:]
	case strings.HasPrefix(t, ">>"):
		op, t = Greater, t[2:]
	case strings.HasPrefix(t, ">="):
		op, t = GreaterEqual, t[2:]
	case strings.HasPrefix(t, "<"):
		op, t = LessEqual, t[1:]
	case strings.HasPrefix(t, ">"):
		op, t = GreaterEqual, t[1:]
	case strings.HasPrefix(t, "="):
		op, t = Equal, t[1:]
	}
	v, err := Parse(strings.TrimSpace(t))
	if err != nil {
		return Relation{}, fmt.Errorf("parsing relation %q: %w", s, err)
	}
	return Relation{Op: op, Version: v}, nil
}

// Match reports whether v satisfies the relation.
func (r Relation) Match(v Version) bool {
	if r.any {
		return true
	}
	c := v.Compare(r.Version)
	switch r.Op {
	case Less:
		return c < 0
	case LessEqual:
		return c <= 0
	case Equal:
		return c == 0
	case GreaterEqual:
		return c >= 0
	case Greater:
		return c > 0
	}
	return false
}

// String returns the relation in canonical form, e.g. ">= 1:1.2-1", or "" for any version.
func (r Relation) String() string {
	if r.any {
		return ""
	}
	return string(r.Op) + " " + r.Version.String()
}
