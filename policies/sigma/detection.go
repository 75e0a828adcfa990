package sigma

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// itemOp is what a field item tests.
type itemOp uint8

const (
	opValues itemOp = iota // the field matches one of the values (all with |all)
	opExists               // |exists: the field is present, or absent
	opNull                 // null: the field is absent
)

// item is one key of a selection map: a field, its modifiers and values.
type item struct {
	f         *field
	op        itemOp
	exists    bool
	all       bool
	needLower bool
	ms        []matcher
}

func (it *item) eval(v *view) bool {
	val := it.f.get(v)
	switch it.op {
	case opExists:
		return val.present == it.exists
	case opNull:
		return !val.present
	}
	if !val.present {
		return false
	}
	low := val
	if it.needLower {
		v.lower(it.f, &low)
	}
	if it.all {
		for _, m := range it.ms {
			if !it.one(v, m, &val, &low) {
				return false
			}
		}
		return true
	}
	for _, m := range it.ms {
		if it.one(v, m, &val, &low) {
			return true
		}
	}
	return false
}

func (it *item) one(v *view, m matcher, raw, low *value) bool {
	switch it.f.typ {
	case tStr:
		return m.match(v, raw.s, low.s)
	case tStrs:
		for i := range raw.list {
			if m.match(v, raw.list[i], low.list[i]) {
				return true
			}
		}
		return false
	}
	return m.matchNum(v, raw.n)
}

// selection is a search identifier: an OR of ANDs of items (a map is one
// AND; a list of maps is their OR).
type selection struct {
	name string
	alts [][]*item
}

func (s *selection) eval(v *view) bool {
	for _, alt := range s.alts {
		ok := true
		for _, it := range alt {
			if !it.eval(v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// The modifiers. supported are applied; unsupported are Sigma modifiers
// this evaluator refuses to load rather than ignore.
var (
	supportedMods = map[string]bool{
		"contains": true, "startswith": true, "endswith": true, "all": true, "exists": true,
		"re": true, "i": true, "m": true, "s": true, "cidr": true, "base64": true,
		"base64offset": true, "windash": true, "lt": true, "lte": true, "gt": true, "gte": true,
		"fieldref": true, "cased": true,
	}
	unsupportedMods = map[string]string{
		"neq":     "not supported: negate a selection in the condition instead",
		"utf16le": "not supported: sandtrail's record holds no UTF-16 text",
		"utf16be": "not supported: sandtrail's record holds no UTF-16 text",
		"utf16":   "not supported: sandtrail's record holds no UTF-16 text",
		"wide":    "not supported: sandtrail's record holds no UTF-16 text",
		"expand":  "not supported: placeholders have no values here",
		"minute":  "not supported: time modifiers", "hour": "not supported: time modifiers",
		"day": "not supported: time modifiers", "week": "not supported: time modifiers",
		"month": "not supported: time modifiers", "year": "not supported: time modifiers",
	}
)

// modset is the parsed modifier chain of one key.
type modset struct {
	order                          []string
	has                            map[string]bool
	contains, startswith, endswith bool
}

func (c *compiler) parseMods(path string, line int, mods []string) (*modset, bool) {
	ms := &modset{has: map[string]bool{}}
	for _, m := range mods {
		if why, ok := unsupportedMods[m]; ok {
			c.errf(line, path, "modifier %q %s", m, why)
			return nil, false
		}
		if !supportedMods[m] {
			c.errf(line, path, "unknown modifier %q", m)
			return nil, false
		}
		if ms.has[m] {
			c.errf(line, path, "modifier %q repeated", m)
			return nil, false
		}
		ms.has[m] = true
		ms.order = append(ms.order, m)
	}
	h := ms.has
	pos := 0
	for _, m := range []string{"contains", "startswith", "endswith"} {
		if h[m] {
			pos++
		}
	}
	if pos > 1 {
		c.errf(line, path, "at most one of contains, startswith and endswith")
		return nil, false
	}
	ms.contains, ms.startswith, ms.endswith = h["contains"], h["startswith"], h["endswith"]
	for _, f := range []string{"i", "m", "s"} {
		if h[f] && !h["re"] {
			c.errf(line, path, "modifier %q applies only to re", f)
			return nil, false
		}
	}
	// Type modifiers stand alone (with all, and re's flags).
	alone := map[string][]string{
		"re":       {"all", "i", "m", "s"},
		"cidr":     {"all"},
		"exists":   {},
		"lt":       {"all"},
		"lte":      {"all"},
		"gt":       {"all"},
		"gte":      {"all"},
		"fieldref": {"all", "cased"},
	}
	for m, with := range alone {
		if !h[m] {
			continue
		}
		for _, o := range ms.order {
			if o != m && !contains(with, o) {
				c.errf(line, path, "modifier %q cannot be combined with %q", m, o)
				return nil, false
			}
		}
	}
	if h["windash"] && (h["base64"] || h["base64offset"]) {
		c.errf(line, path, "windash cannot be combined with base64 or base64offset")
		return nil, false
	}
	if h["base64"] && h["base64offset"] {
		c.errf(line, path, "base64 and base64offset cannot be combined")
		return nil, false
	}
	if h["base64offset"] && !h["contains"] {
		c.errf(line, path, "base64offset needs contains: its variants are parts of a longer encoding")
		return nil, false
	}
	return ms, true
}

// compileItem compiles key: value of a selection map.
func (c *compiler) compileItem(path string, key *yaml.Node, val *yaml.Node) *item {
	parts := strings.Split(key.Value, "|")
	name, mods := parts[0], parts[1:]
	if name == "" {
		c.errf(key.Line, path, "keyword search (a key with no field name) is not supported: name the field to search")
		return nil
	}
	f := c.cat.fields[name]
	if f == nil {
		c.errf(key.Line, path, "unknown field %q for logsource %s/%s", name, c.cat.product, c.cat.name)
		return nil
	}
	ms, ok := c.parseMods(path, key.Line, mods)
	if !ok {
		return nil
	}
	vals := c.itemValues(path, val)
	if vals == nil {
		return nil
	}
	it := &item{f: f}
	switch {
	case ms.has["exists"]:
		if len(vals) != 1 || !isBool(vals[0]) {
			c.errf(val.Line, path, "exists takes one value, true or false")
			return nil
		}
		it.op, it.exists = opExists, vals[0].Value == "true" || strings.EqualFold(vals[0].Value, "true")
		return it
	case len(vals) == 1 && isNull(vals[0]):
		if len(mods) > 0 {
			c.errf(val.Line, path, "null takes no modifiers")
			return nil
		}
		it.op = opNull
		return it
	case ms.has["all"] && len(vals) < 2:
		c.errf(val.Line, path, "all needs a list of two or more values")
		return nil
	}
	if !c.compileMatchers(it, path, ms, vals) {
		return nil
	}
	if it.all && (ms.has["base64offset"]) {
		// base64offset turns one value into three alternatives; all
		// would require every alternative.
		c.errf(val.Line, path, "all cannot be combined with base64offset")
		return nil
	}
	return it
}

// itemValues returns the values of an item: a scalar, or a list of
// scalars that are not null. It returns nil on an error, which it reports.
func (c *compiler) itemValues(path string, val *yaml.Node) []*yaml.Node {
	switch val.Kind {
	case yaml.ScalarNode:
		return []*yaml.Node{val}
	case yaml.SequenceNode:
		return c.listOf(path, val, "empty list of values", func(v *yaml.Node) bool {
			switch {
			case v.Kind != yaml.ScalarNode:
				c.errf(v.Line, path, "a value must be a string, number, boolean or null")
				return false
			case isNull(v):
				c.errf(v.Line, path, "null cannot be part of a list of values: put it in a selection of its own")
				return false
			}
			return true
		})
	}
	c.errf(val.Line, path, "a value must be a string, number, boolean or null, or a list of them")
	return nil
}

// listOf returns the elements of the sequence n, aliases resolved, when
// there is one or more and ok, which reports what is wrong with one,
// passes each; else it returns nil, having reported an empty list with the
// message empty.
func (c *compiler) listOf(path string, n *yaml.Node, empty string, ok func(*yaml.Node) bool) []*yaml.Node {
	if len(n.Content) == 0 {
		c.errf(n.Line, path, "%s", empty)
		return nil
	}
	out := make([]*yaml.Node, 0, len(n.Content))
	for _, e := range n.Content {
		e = c.deref(e)
		if e == nil || !ok(e) {
			return nil
		}
		out = append(out, e)
	}
	return out
}

// compileMatchers compiles each of vals into it's matchers, OR-ed or
// (with all) AND-ed, and notes whether a match needs the value lowered.
func (c *compiler) compileMatchers(it *item, path string, ms *modset, vals []*yaml.Node) bool {
	it.all = ms.has["all"]
	for _, v := range vals {
		m := c.compileValue(path, it.f, ms, v)
		if m == nil {
			return false
		}
		it.ms = append(it.ms, m...)
		for _, x := range m {
			if sm, ok := x.(*strMatcher); ok && !sm.cased && (it.f.typ == tStr || it.f.typ == tStrs) {
				it.needLower = true
			}
		}
	}
	return true
}

// compileValue compiles one value under the modifiers into its matchers
// (base64offset gives three, OR-ed).
func (c *compiler) compileValue(path string, f *field, ms *modset, v *yaml.Node) []matcher {
	if m, done := c.compileOperator(path, ms, v); done {
		return m
	}
	if f.typ == tBool {
		return c.compileBool(path, f, ms, v)
	}
	if f.typ == tInt && len(ms.order) == 0 {
		if n, err := strconv.ParseInt(strings.TrimSpace(v.Value), 10, 64); err == nil {
			return []matcher{&numMatcher{op: cmpEq, n: n}}
		}
		if !hasWild(parseSigmaString(v.Value)) {
			c.errf(v.Line, path, "integer field %s needs an integer or a wildcard pattern, got %q", f.name, v.Value)
			return nil
		}
	}
	variants, cased := c.stringVariants(path, ms, v)
	if len(variants) == 0 {
		return nil
	}
	out := make([]matcher, 0, len(variants))
	for _, ts := range variants {
		if ms.contains || ms.endswith {
			ts = append([]tok{{wild: '*'}}, ts...)
		}
		if ms.contains || ms.startswith {
			ts = append(ts, tok{wild: '*'})
		}
		out = append(out, newStrMatcher(ts, cased, ms.has["windash"]))
	}
	return out
}

// compileOperator compiles a value under a modifier that is an operator of
// its own (re, cidr, lt/lte/gt/gte, fieldref); done is false when ms has
// none, and true with nil matchers on an error, which it reports.
func (c *compiler) compileOperator(path string, ms *modset, v *yaml.Node) (m []matcher, done bool) {
	h := ms.has
	switch {
	case h["re"]:
		return c.compileRegexp(path, ms, v), true
	case h["cidr"]:
		p, err := netip.ParsePrefix(strings.TrimSpace(v.Value))
		if err != nil {
			c.errf(v.Line, path, "cidr value %q: %v", v.Value, err)
			return nil, true
		}
		return []matcher{&cidrMatcher{p: p.Masked()}}, true
	case h["lt"] || h["lte"] || h["gt"] || h["gte"]:
		n, err := strconv.ParseInt(strings.TrimSpace(v.Value), 10, 64)
		if err != nil {
			c.errf(v.Line, path, "numeric modifier needs an integer, got %q", v.Value)
			return nil, true
		}
		op := map[string]cmpOp{"lt": cmpLt, "lte": cmpLte, "gt": cmpGt, "gte": cmpGte}[ms.order[0]]
		for _, m := range ms.order {
			if o, ok := map[string]cmpOp{"lt": cmpLt, "lte": cmpLte, "gt": cmpGt, "gte": cmpGte}[m]; ok {
				op = o
			}
		}
		return []matcher{&numMatcher{op: op, n: n}}, true
	case h["fieldref"]:
		ref := c.cat.fields[v.Value]
		if ref == nil {
			c.errf(v.Line, path, "fieldref names unknown field %q for logsource %s/%s", v.Value, c.cat.product, c.cat.name)
			return nil, true
		}
		return []matcher{&refMatcher{ref: ref, cased: h["cased"]}}, true
	}
	return nil, false
}

// compileRegexp compiles a re value, with the i, m and s flags ms has.
func (c *compiler) compileRegexp(path string, ms *modset, v *yaml.Node) []matcher {
	flags := ""
	for _, fl := range []string{"i", "m", "s"} {
		if ms.has[fl] {
			flags += fl
		}
	}
	expr := v.Value
	if flags != "" {
		expr = "(?" + flags + ")" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		c.errf(v.Line, path, "regular expression %q is not valid RE2 (PCRE-only constructs such as lookaround and backreferences are not supported): %v", v.Value, err)
		return nil
	}
	return []matcher{&reMatcher{re: re}}
}

// compileBool compiles a value of a boolean field: true or false, with no
// modifiers.
func (c *compiler) compileBool(path string, f *field, ms *modset, v *yaml.Node) []matcher {
	if len(ms.order) > 0 {
		c.errf(v.Line, path, "boolean field %s takes no string modifiers", f.name)
		return nil
	}
	switch strings.ToLower(v.Value) {
	case "true":
		return []matcher{&numMatcher{op: cmpEq, n: 1}}
	case "false":
		return []matcher{&numMatcher{op: cmpEq, n: 0}}
	}
	c.errf(v.Line, path, "boolean field %s needs true or false, got %q", f.name, v.Value)
	return nil
}

// stringVariants returns the patterns a string value stands for (one, or
// base64offset's three) and whether they match case-sensitively. It
// returns none on an error, which it reports.
func (c *compiler) stringVariants(path string, ms *modset, v *yaml.Node) (variants [][]tok, cased bool) {
	h := ms.has
	if !h["base64"] && !h["base64offset"] {
		return [][]tok{parseSigmaString(v.Value)}, h["cased"]
	}
	ts := parseSigmaString(v.Value)
	if hasWild(ts) {
		c.errf(v.Line, path, "a base64 value cannot hold wildcards")
		return nil, false
	}
	plain := []byte(literal(ts))
	if len(plain) == 0 {
		c.errf(v.Line, path, "a base64 value cannot be empty")
		return nil, false
	}
	// Encoded text is case-sensitive: lower-casing it would change what it
	// decodes to.
	if h["base64"] {
		return [][]tok{{{lit: base64.StdEncoding.EncodeToString(plain)}}}, true
	}
	for _, s := range base64Offsets(plain) {
		variants = append(variants, []tok{{lit: s}})
	}
	if len(variants) == 0 {
		c.errf(v.Line, path, "value %q is too short to be found in base64 text", v.Value)
	}
	return variants, true
}

// base64Offsets returns the three encodings of plain at byte offsets 0, 1
// and 2 of a longer encoded text, cut to the characters that do not depend
// on the bytes around it (as pySigma's base64offset does).
func base64Offsets(plain []byte) []string {
	start := []int{0, 2, 3}
	endCut := []int{0, 3, 2}
	out := make([]string, 0, 3)
	for i := 0; i < 3; i++ {
		b := append([]byte(strings.Repeat(" ", i)), plain...)
		enc := base64.StdEncoding.EncodeToString(b)
		end := len(enc) - endCut[(len(plain)+i)%3]
		if start[i] >= end {
			continue
		}
		out = append(out, enc[start[i]:end])
	}
	return out
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func isBool(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode {
		return false
	}
	if n.Tag == "!!bool" {
		return true
	}
	return n.Tag == "!!str" && (strings.EqualFold(n.Value, "true") || strings.EqualFold(n.Value, "false"))
}

// compileSelection compiles a search identifier: a map, or a list of maps.
func (c *compiler) compileSelection(name string, n *yaml.Node) *selection {
	path := "detection." + name
	s := &selection{name: name}
	var maps []*yaml.Node
	switch n.Kind {
	case yaml.MappingNode:
		maps = []*yaml.Node{n}
	case yaml.SequenceNode:
		maps = c.listOf(path, n, "empty list", func(m *yaml.Node) bool {
			if m.Kind != yaml.MappingNode {
				c.errf(m.Line, path, "keyword search (a list of plain values) is not supported: name the field to search")
				return false
			}
			return true
		})
		if maps == nil {
			return nil
		}
	default:
		c.errf(n.Line, path, "a search identifier must be a map of fields or a list of maps")
		return nil
	}
	for _, m := range maps {
		if len(m.Content) == 0 {
			c.errf(m.Line, path, "empty map")
			return nil
		}
		var alt []*item
		seen := map[string]bool{}
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := c.deref(m.Content[i]), c.deref(m.Content[i+1])
			if k == nil || v == nil {
				return nil
			}
			if k.Kind != yaml.ScalarNode {
				c.errf(k.Line, path, "a field name must be a string")
				return nil
			}
			if seen[k.Value] {
				c.errf(k.Line, path, "key %q repeated", k.Value)
				return nil
			}
			seen[k.Value] = true
			it := c.compileItem(path+"."+k.Value, k, v)
			if it == nil {
				return nil
			}
			alt = append(alt, it)
		}
		// AND is commutative: test the cheap items first.
		slices.SortStableFunc(alt, func(a, b *item) int { return a.cost() - b.cost() })
		s.alts = append(s.alts, alt)
	}
	return s
}

// cost ranks an item by how much its test costs: presence tests, numbers
// and plain strings before wildcard patterns, regular expressions and
// other fields; a list field costs more than one string.
func (it *item) cost() int {
	c := 0
	if it.f.typ == tStrs {
		c++
	}
	for _, m := range it.ms {
		switch m := m.(type) {
		case *reMatcher:
			c += 8
		case *refMatcher:
			c += 4
		case *strMatcher:
			if m.mode == modeGlob || m.windash {
				c += 2
			}
		}
	}
	return c
}

// errf records a problem of the rule being compiled.
func (c *compiler) errf(line int, path, format string, args ...any) {
	c.errs = append(c.errs, &Error{File: c.file, Line: line, Rule: c.ruleName(), Field: path, Msg: fmt.Sprintf(format, args...)})
}
