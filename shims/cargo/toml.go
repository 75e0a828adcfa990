package cargo

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The TOML this package reads is Cargo.toml and Cargo.lock: tables, arrays
// of tables, dotted and quoted keys, strings (basic, literal and their
// multi-line forms), inline tables and arrays. Numbers, booleans and dates
// are kept as their raw text (a scalar), which is all a manifest's
// dependency tables need.

// scalar is a non-string TOML value, as written (true, 3, 1979-05-27).
type scalar string

// ErrTOML is wrapped by every TOML syntax error.
var ErrTOML = errors.New("cargo: bad TOML")

// maxDepth bounds nesting of arrays and inline tables.
const maxDepth = 64

// tomlParser is the state of one parse.
type tomlParser struct {
	s     string
	i     int
	line  int
	root  map[string]any
	cur   map[string]any
	depth int
}

// parseTOML parses a TOML document into nested maps: map[string]any for
// tables, []any for arrays, string for strings and scalar for the rest.
func parseTOML(s string) (map[string]any, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%w: not UTF-8", ErrTOML)
	}
	p := &tomlParser{s: s, line: 1, root: map[string]any{}}
	p.cur = p.root
	for {
		p.skipSpaceNewlinesComments()
		if p.i >= len(p.s) {
			return p.root, nil
		}
		if err := p.statement(); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrTOML, p.line, err)
		}
	}
}

// statement reads a table header or a key/value line.
func (p *tomlParser) statement() error {
	var err error
	if strings.HasPrefix(p.s[p.i:], "[[") {
		p.i += 2
		err = p.header(true)
	} else if p.s[p.i] == '[' {
		p.i++
		err = p.header(false)
	} else {
		err = p.keyValue(p.cur)
	}
	if err != nil {
		return err
	}
	return p.endOfLine()
}

// header reads a [table] or [[array]] header (after the brackets).
func (p *tomlParser) header(array bool) error {
	keys, err := p.key()
	if err != nil {
		return err
	}
	p.skipSpace()
	closing := "]"
	if array {
		closing = "]]"
	}
	if !strings.HasPrefix(p.s[p.i:], closing) {
		return fmt.Errorf("want %q after the table name", closing)
	}
	p.i += len(closing)
	t := p.root
	for _, k := range keys[:len(keys)-1] {
		if t, err = descend(t, k); err != nil {
			return err
		}
	}
	last := keys[len(keys)-1]
	if !array {
		t, err = descend(t, last)
		p.cur = t
		return err
	}
	v, ok := t[last]
	if !ok {
		v = []any{}
	}
	arr, ok := v.([]any)
	if !ok {
		return fmt.Errorf("%q is not an array of tables", last)
	}
	nt := map[string]any{}
	t[last] = append(arr, nt)
	p.cur = nt
	return nil
}

// descend returns t's sub-table k, creating it; through an array of
// tables it goes to the last element.
func descend(t map[string]any, k string) (map[string]any, error) {
	switch v := t[k].(type) {
	case nil:
		nt := map[string]any{}
		t[k] = nt
		return nt, nil
	case map[string]any:
		return v, nil
	case []any:
		if len(v) > 0 {
			if m, ok := v[len(v)-1].(map[string]any); ok {
				return m, nil
			}
		}
	}
	return nil, fmt.Errorf("%q is not a table", k)
}

// keyValue reads key = value into t.
func (p *tomlParser) keyValue(t map[string]any) error {
	keys, err := p.key()
	if err != nil {
		return err
	}
	p.skipSpace()
	if p.i >= len(p.s) || p.s[p.i] != '=' {
		return errors.New("want = after a key")
	}
	p.i++
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return err
	}
	for _, k := range keys[:len(keys)-1] {
		if t, err = descend(t, k); err != nil {
			return err
		}
	}
	last := keys[len(keys)-1]
	if _, dup := t[last]; dup {
		return fmt.Errorf("key %q defined twice", last)
	}
	t[last] = v
	return nil
}

// key reads a dotted key: bare, "basic" or 'literal' parts.
func (p *tomlParser) key() ([]string, error) {
	var keys []string
	for {
		p.skipSpace()
		if p.i >= len(p.s) {
			return nil, errors.New("want a key")
		}
		var k string
		var err error
		switch p.s[p.i] {
		case '"':
			k, err = p.basicString()
		case '\'':
			k, err = p.literalString()
		default:
			k = p.bareKey()
			if k == "" {
				return nil, fmt.Errorf("bad key character %q", p.s[p.i])
			}
		}
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == '.' {
			p.i++
			continue
		}
		return keys, nil
	}
}

func (p *tomlParser) bareKey() string {
	j := p.i
	for j < len(p.s) && isBare(p.s[j]) {
		j++
	}
	k := p.s[p.i:j]
	p.i = j
	return k
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// value reads one value.
func (p *tomlParser) value() (any, error) {
	if p.i >= len(p.s) {
		return nil, errors.New("want a value")
	}
	switch c := p.s[p.i]; {
	case strings.HasPrefix(p.s[p.i:], `"""`):
		return p.multiBasic()
	case strings.HasPrefix(p.s[p.i:], `'''`):
		return p.multiLiteral()
	case c == '"':
		return p.basicString()
	case c == '\'':
		return p.literalString()
	case c == '[':
		return p.array()
	case c == '{':
		return p.inlineTable()
	}
	j := p.i
	for j < len(p.s) && (isBare(p.s[j]) || strings.IndexByte("+.:", p.s[j]) >= 0 ||
		(p.s[j] == ' ' && j+1 < len(p.s) && isDigit(p.s[j+1]) && j > 0 && isDigit(p.s[j-1]))) {
		j++
	}
	if j == p.i {
		return nil, fmt.Errorf("bad value starting %q", p.s[p.i])
	}
	v := scalar(p.s[p.i:j])
	p.i = j
	return v, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// array reads [v, v, ...], newlines and comments allowed between values.
func (p *tomlParser) array() (any, error) {
	if p.depth++; p.depth > maxDepth {
		return nil, errors.New("nested too deeply")
	}
	defer func() { p.depth-- }()
	p.i++
	arr := []any{}
	for {
		p.skipSpaceNewlinesComments()
		if p.i >= len(p.s) {
			return nil, errors.New("unterminated array")
		}
		if p.s[p.i] == ']' {
			p.i++
			return arr, nil
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		p.skipSpaceNewlinesComments()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
		} else if p.i >= len(p.s) || p.s[p.i] != ']' {
			return nil, errors.New("want , or ] in an array")
		}
	}
}

// inlineTable reads { k = v, ... } on one line.
func (p *tomlParser) inlineTable() (any, error) {
	if p.depth++; p.depth > maxDepth {
		return nil, errors.New("nested too deeply")
	}
	defer func() { p.depth-- }()
	p.i++
	t := map[string]any{}
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return t, nil
	}
	for {
		if err := p.keyValue(t); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.i >= len(p.s) {
			return nil, errors.New("unterminated inline table")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return t, nil
		default:
			return nil, errors.New("want , or } in an inline table")
		}
	}
}

// basicString reads "..." with escapes.
func (p *tomlParser) basicString() (string, error) {
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), nil
		case c == '\n':
			return "", errors.New("newline in a string")
		case c == '\\':
			if err := p.escape(&b); err != nil {
				return "", err
			}
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return "", errors.New("unterminated string")
}

// escape reads one backslash escape into b.
func (p *tomlParser) escape(b *strings.Builder) error {
	if p.i+1 >= len(p.s) {
		return errors.New("unterminated escape")
	}
	c := p.s[p.i+1]
	p.i += 2
	simple := map[byte]byte{'b': '\b', 't': '\t', 'n': '\n', 'f': '\f', 'r': '\r', '"': '"', '\\': '\\', 'e': 0x1b}
	if r, ok := simple[c]; ok {
		b.WriteByte(r)
		return nil
	}
	n := map[byte]int{'u': 4, 'U': 8, 'x': 2}[c]
	if n == 0 || p.i+n > len(p.s) {
		return fmt.Errorf("bad escape \\%c", c)
	}
	u, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
	if err != nil || !utf8.ValidRune(rune(u)) {
		return fmt.Errorf("bad escape \\%c%s", c, p.s[p.i:p.i+n])
	}
	p.i += n
	b.WriteRune(rune(u))
	return nil
}

// literalString reads '...'.
func (p *tomlParser) literalString() (string, error) {
	p.i++
	j := strings.IndexAny(p.s[p.i:], "'\n")
	if j < 0 || p.s[p.i+j] == '\n' {
		return "", errors.New("unterminated literal string")
	}
	v := p.s[p.i : p.i+j]
	p.i += j + 1
	return v, nil
}

// multiBasic reads """...""".
func (p *tomlParser) multiBasic() (string, error) {
	p.i += 3
	p.trimFirstNewline()
	var b strings.Builder
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case strings.HasPrefix(p.s[p.i:], `"""`):
			p.i += 3
			// Up to two more quotes belong to the string.
			for k := 0; k < 2 && p.i < len(p.s) && p.s[p.i] == '"'; k++ {
				b.WriteByte('"')
				p.i++
			}
			return b.String(), nil
		case c == '\\' && p.i+1 < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i+1]) >= 0:
			// A line-ending backslash trims the whitespace after it.
			p.i++
			for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
				p.countNewline()
				p.i++
			}
		case c == '\\':
			if err := p.escape(&b); err != nil {
				return "", err
			}
		default:
			p.countNewline()
			b.WriteByte(c)
			p.i++
		}
	}
	return "", errors.New(`unterminated """ string`)
}

// multiLiteral reads ”'...”'.
func (p *tomlParser) multiLiteral() (string, error) {
	p.i += 3
	p.trimFirstNewline()
	j := strings.Index(p.s[p.i:], "'''")
	if j < 0 {
		return "", errors.New("unterminated ''' string")
	}
	// Up to two more quotes belong to the string.
	for k := 0; k < 2 && p.i+j+3 < len(p.s) && p.s[p.i+j+3] == '\''; k++ {
		j++
	}
	v := p.s[p.i : p.i+j]
	p.line += strings.Count(v, "\n")
	p.i += j + 3
	return v, nil
}

func (p *tomlParser) trimFirstNewline() {
	if strings.HasPrefix(p.s[p.i:], "\r\n") {
		p.i += 2
		p.line++
	} else if strings.HasPrefix(p.s[p.i:], "\n") {
		p.i++
		p.line++
	}
}

func (p *tomlParser) countNewline() {
	if p.s[p.i] == '\n' {
		p.line++
	}
}

func (p *tomlParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *tomlParser) skipComment() {
	if p.i < len(p.s) && p.s[p.i] == '#' {
		j := strings.IndexByte(p.s[p.i:], '\n')
		if j < 0 {
			p.i = len(p.s)
		} else {
			p.i += j
		}
	}
}

func (p *tomlParser) skipSpaceNewlinesComments() {
	for {
		p.skipSpace()
		p.skipComment()
		if p.i < len(p.s) && (p.s[p.i] == '\n' || p.s[p.i] == '\r') {
			p.countNewline()
			p.i++
			continue
		}
		return
	}
}

// endOfLine accepts spaces, a comment and a newline (or the end).
func (p *tomlParser) endOfLine() error {
	p.skipSpace()
	p.skipComment()
	if p.i >= len(p.s) {
		return nil
	}
	if strings.HasPrefix(p.s[p.i:], "\r\n") || p.s[p.i] == '\n' {
		return nil
	}
	return fmt.Errorf("unexpected %q after a value", p.s[p.i])
}
