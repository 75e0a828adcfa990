package sigma

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// node is a condition, parsed once at load.
type node interface {
	eval(sels []*selection, v *view) bool
	String() string
}

type (
	andNode []node
	orNode  []node
	notNode struct{ x node }
	refNode int // a selection, by index
	// ofNode is "N of pattern", "all of pattern", "1 of them"...: at least
	// n of the selections (all of them when n is 0).
	ofNode struct {
		n    int
		sels []int
		src  string
	}
)

func (a andNode) eval(s []*selection, v *view) bool {
	for _, x := range a {
		if !x.eval(s, v) {
			return false
		}
	}
	return true
}

func (o orNode) eval(s []*selection, v *view) bool {
	for _, x := range o {
		if x.eval(s, v) {
			return true
		}
	}
	return false
}

func (n notNode) eval(s []*selection, v *view) bool { return !n.x.eval(s, v) }

func (r refNode) eval(s []*selection, v *view) bool { return s[r].eval(v) }

func (o ofNode) eval(s []*selection, v *view) bool {
	need := o.n
	if need == 0 {
		need = len(o.sels)
	}
	got := 0
	for i, id := range o.sels {
		if s[id].eval(v) {
			got++
			if got >= need {
				return true
			}
		}
		// Not enough left to reach need.
		if got+len(o.sels)-i-1 < need {
			return false
		}
	}
	return got >= need
}

func (a andNode) String() string { return join("and", a) }
func (o orNode) String() string  { return join("or", o) }
func (n notNode) String() string { return "(not " + n.x.String() + ")" }
func (r refNode) String() string { return "#" + strconv.Itoa(int(r)) }
func (o ofNode) String() string  { return o.src }

func join(op string, xs []node) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = x.String()
	}
	return "(" + strings.Join(parts, " "+op+" ") + ")"
}

// maxCondDepth bounds the nesting of a condition.
const maxCondDepth = 64

// condToken is one lexical element of a condition.
type condToken struct {
	kind string // "(", ")", "and", "or", "not", "of", "them", "all", "num", "id"
	text string
	pos  int
}

func lexCondition(s string) ([]condToken, error) {
	var out []condToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '|':
			return nil, errors.New("aggregation expressions (| count() ...) are obsolete Sigma: write a correlation rule")
		case c == '(' || c == ')':
			out = append(out, condToken{kind: string(c), text: string(c), pos: i})
			i++
		case isIdentByte(c):
			j := i
			for j < len(s) && isIdentByte(s[j]) {
				j++
			}
			w := s[i:j]
			kind := "id"
			switch lw := strings.ToLower(w); lw {
			case "and", "or", "not", "of", "them", "all":
				kind = lw
			default:
				if _, err := strconv.Atoi(w); err == nil {
					kind = "num"
				}
			}
			out = append(out, condToken{kind: kind, text: w, pos: i})
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q at offset %d", c, i)
		}
	}
	return out, nil
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '*' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// condParser is a recursive-descent parser of Sigma's condition grammar:
//
//	expr    = and { "or" and }
//	and     = unary { "and" unary }
//	unary   = "not" unary | primary
//	primary = "(" expr ")" | quant "of" ( pattern | "them" ) | identifier
//	quant   = number | "all"
type condParser struct {
	toks  []condToken
	i     int
	depth int
	names []string // the selections, in detection order
}

// parseCondition parses s against the selection names.
func parseCondition(s string, names []string) (node, error) {
	toks, err := lexCondition(s)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, errors.New("empty condition")
	}
	p := &condParser{toks: toks, names: names}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.i < len(p.toks) {
		t := p.toks[p.i]
		return nil, fmt.Errorf("unexpected %q at offset %d", t.text, t.pos)
	}
	return n, nil
}

func (p *condParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i].kind
	}
	return ""
}

func (p *condParser) next() condToken {
	t := p.toks[p.i]
	p.i++
	return t
}

func (p *condParser) expr() (node, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxCondDepth {
		return nil, fmt.Errorf("condition nested deeper than %d", maxCondDepth)
	}
	first, err := p.and()
	if err != nil {
		return nil, err
	}
	or := orNode{first}
	for p.peek() == "or" {
		p.next()
		x, err := p.and()
		if err != nil {
			return nil, err
		}
		or = append(or, x)
	}
	if len(or) == 1 {
		return first, nil
	}
	return or, nil
}

func (p *condParser) and() (node, error) {
	first, err := p.unary()
	if err != nil {
		return nil, err
	}
	and := andNode{first}
	for p.peek() == "and" {
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		and = append(and, x)
	}
	if len(and) == 1 {
		return first, nil
	}
	return and, nil
}

func (p *condParser) unary() (node, error) {
	if p.peek() == "not" {
		p.next()
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > maxCondDepth {
			return nil, fmt.Errorf("condition nested deeper than %d", maxCondDepth)
		}
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return notNode{x}, nil
	}
	return p.primary()
}

func (p *condParser) primary() (node, error) {
	if p.i >= len(p.toks) {
		return nil, errors.New("condition ends where an identifier or ( was expected")
	}
	t := p.next()
	switch t.kind {
	case "(":
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.peek() != ")" {
			return nil, fmt.Errorf("missing ) for ( at offset %d", t.pos)
		}
		p.next()
		return x, nil
	case "num", "all":
		return p.of(t)
	case "id":
		if strings.Contains(t.text, "*") {
			return nil, fmt.Errorf("pattern %q must follow \"1 of\" or \"all of\"", t.text)
		}
		for i, n := range p.names {
			if n == t.text {
				return refNode(i), nil
			}
		}
		return nil, fmt.Errorf("condition names %q, which detection does not define", t.text)
	}
	return nil, fmt.Errorf("unexpected %q at offset %d", t.text, t.pos)
}

func (p *condParser) of(q condToken) (node, error) {
	n := 0
	if q.kind == "num" {
		var err error
		n, err = strconv.Atoi(q.text)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q of: the count must be at least 1", q.text)
		}
	}
	if p.peek() != "of" {
		return nil, fmt.Errorf("expected \"of\" after %q at offset %d", q.text, q.pos)
	}
	p.next()
	if p.i >= len(p.toks) {
		return nil, fmt.Errorf("%q of: missing a pattern or \"them\"", q.text)
	}
	t := p.next()
	var sels []int
	switch t.kind {
	case "them":
		for i, name := range p.names {
			if !strings.HasPrefix(name, "_") {
				sels = append(sels, i)
			}
		}
	case "id":
		for i, name := range p.names {
			if ok, _ := path.Match(t.text, name); ok {
				sels = append(sels, i)
			}
		}
		if len(sels) == 0 {
			return nil, fmt.Errorf("pattern %q matches no search identifier", t.text)
		}
	default:
		return nil, fmt.Errorf("%q of: expected a pattern or \"them\", got %q", q.text, t.text)
	}
	if len(sels) == 0 {
		return nil, fmt.Errorf("%q of them: no search identifiers", q.text)
	}
	if n > len(sels) {
		return nil, fmt.Errorf("%d of %s: only %d search identifiers match", n, t.text, len(sels))
	}
	return ofNode{n: n, sels: sels, src: q.text + " of " + t.text}, nil
}
