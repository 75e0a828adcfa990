package sigma

import (
	"container/list"
	"hash/maphash"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	yaml "go.yaml.in/yaml/v3"
)

// Correlation types.
const (
	EventCount = "event_count"
	ValueCount = "value_count"
	Temporal   = "temporal"
)

// Bound is one criterion of a correlation's condition.
type Bound struct {
	// Op is gt, gte, lt, lte or eq.
	Op string
	N  int64
}

// Correlation is the correlation section of a correlation rule.
type Correlation struct {
	Type     string
	Rules    []string
	GroupBy  []string
	Timespan time.Duration
	// Field is value_count's field.
	Field     string
	Condition []Bound
	// Generate: the rules referred to also raise matches of their own.
	Generate bool
}

// correlation is a linked correlation rule.
type correlation struct {
	r     *Rule
	spec  *Correlation
	bases []*Rule
	// groupBy[i] and field[i] are the fields as base i's category names
	// them.
	groupBy [][]*field
	field   []*field
	conds   []cond
}

type cond struct {
	op cmpOp
	n  int64
}

var timespanRE = regexp.MustCompile(`^([1-9][0-9]{0,8})([smhd])$`)

// linkCorrelation reads the correlation section and links it to the
// rules it refers to.
func (c *compiler) linkCorrelation(byRef map[string]*Rule) (*correlation, []error) {
	c.errs = nil
	spec := &Correlation{}
	corr := &correlation{r: c.r, spec: spec}
	keys, vals, ok := c.mapping("correlation", c.corr)
	if !ok {
		return nil, c.errs
	}
	if c.generate != nil {
		keys, vals = append(keys, "generate"), append(vals, c.generate)
	}
	condNode := c.readCorrAttrs(spec, keys, vals)
	c.checkCorrSpec(spec, corr, keys, condNode)
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	for _, ref := range spec.Rules {
		c.linkBase(corr, byRef, ref)
	}
	if spec.Type == Temporal && len(corr.bases) < 2 && len(c.errs) == 0 {
		c.errf(c.corr.Line, "correlation.rules", "temporal needs two or more rules")
	}
	if spec.Type == Temporal && len(corr.conds) == 0 {
		corr.conds = []cond{{cmpGte, int64(len(corr.bases))}}
	}
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	for _, b := range corr.bases {
		b.corrs = append(b.corrs, corr)
	}
	return corr, nil
}

// readCorrAttrs reads the correlation section's attributes (keys, vals)
// into spec, all but the condition, whose node it returns (nil without
// one).
func (c *compiler) readCorrAttrs(spec *Correlation, keys []string, vals []*yaml.Node) *yaml.Node {
	var condNode *yaml.Node
	for i, k := range keys {
		p := "correlation." + k
		v := vals[i]
		switch k {
		case "type":
			spec.Type, _ = c.scalar(p, v)
		case "rules":
			spec.Rules, _ = c.strings(p, v)
		case "group-by":
			spec.GroupBy, _ = c.strings(p, v)
		case "timespan":
			if d, ok := c.timespan(p, v); ok {
				spec.Timespan = d
			}
		case "condition":
			condNode = v
		case "generate":
			spec.Generate = c.generateFlag(p, v) || spec.Generate
		case "aliases":
			c.errf(v.Line, p, "field name aliases are not supported")
		default:
			c.errf(v.Line, p, "unknown correlation attribute")
		}
	}
	return condNode
}

// timespan reads a timespan: a number and one of s, m, h, d (10m).
func (c *compiler) timespan(p string, v *yaml.Node) (time.Duration, bool) {
	ts, _ := c.scalar(p, v)
	m := timespanRE.FindStringSubmatch(ts)
	if m == nil {
		c.errf(v.Line, p, "%q is not a number and one of s, m, h, d (10m)", ts)
		return 0, false
	}
	n, _ := strconv.Atoi(m[1])
	unit := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[m[2]]
	return time.Duration(n) * unit, true
}

// generateFlag reads generate: true or false.
func (c *compiler) generateFlag(p string, v *yaml.Node) bool {
	s, _ := c.scalar(p, v)
	switch s {
	case "true":
		return true
	case "false":
	default:
		c.errf(v.Line, p, "must be true or false")
	}
	return false
}

// checkCorrSpec checks that spec's attributes (keys as written) make a
// correlation this package runs, and parses its condition (condNode, nil
// without one) into spec and corr.
func (c *compiler) checkCorrSpec(spec *Correlation, corr *correlation, keys []string, condNode *yaml.Node) {
	switch spec.Type {
	case EventCount, ValueCount, Temporal:
	case "temporal_ordered", "value_sum", "value_avg", "value_percentile":
		c.errf(c.corr.Line, "correlation.type", "%q is not supported", spec.Type)
	default:
		c.errf(c.corr.Line, "correlation.type", "%q is not event_count, value_count or temporal", spec.Type)
	}
	if len(spec.Rules) == 0 {
		c.errf(c.corr.Line, "correlation.rules", "missing")
	}
	if spec.Timespan == 0 && !slices.Contains(keys, "timespan") {
		c.errf(c.corr.Line, "correlation.timespan", "missing")
	}
	if condNode != nil {
		c.parseCorrCondition(spec, corr, condNode)
	} else if spec.Type != Temporal {
		c.errf(c.corr.Line, "correlation.condition", "missing")
	}
	if spec.Type == ValueCount && spec.Field == "" && condNode != nil {
		c.errf(condNode.Line, "correlation.condition.field", "value_count needs a field")
	}
	if spec.Type != ValueCount && spec.Field != "" {
		c.errf(condNode.Line, "correlation.condition.field", "only value_count takes a field")
	}
}

// linkBase links corr to the rule ref names (byRef: by id and name), with
// the group-by fields and value field as its category names them.
func (c *compiler) linkBase(corr *correlation, byRef map[string]*Rule, ref string) {
	spec := corr.spec
	b := byRef[ref]
	switch {
	case b == nil:
		c.errf(c.corr.Line, "correlation.rules", "%q is the id or name of no rule loaded with it", ref)
		return
	case b.cat == nil:
		c.errf(c.corr.Line, "correlation.rules", "%q is a correlation rule: chains of correlations are not supported", ref)
		return
	case slices.Contains(corr.bases, b):
		c.errf(c.corr.Line, "correlation.rules", "%q is listed twice", ref)
		return
	}
	var gb []*field
	for _, g := range spec.GroupBy {
		f := b.cat.fields[g]
		if f == nil {
			c.errf(c.corr.Line, "correlation.group-by", "unknown field %q for logsource %s/%s of rule %q", g, b.cat.product, b.cat.name, ref)
		}
		gb = append(gb, f)
	}
	var vf *field
	if spec.Field != "" {
		if vf = b.cat.fields[spec.Field]; vf == nil {
			c.errf(c.corr.Line, "correlation.condition.field", "unknown field %q for logsource %s/%s of rule %q", spec.Field, b.cat.product, b.cat.name, ref)
		}
	}
	corr.bases = append(corr.bases, b)
	corr.groupBy = append(corr.groupBy, gb)
	corr.field = append(corr.field, vf)
}

func (c *compiler) parseCorrCondition(spec *Correlation, corr *correlation, n *yaml.Node) {
	keys, vals, ok := c.mapping("correlation.condition", n)
	if !ok {
		return
	}
	lower := false
	for i, k := range keys {
		p := "correlation.condition." + k
		s, ok := c.scalar(p, vals[i])
		if !ok {
			continue
		}
		if k == "field" {
			spec.Field = s
			continue
		}
		op, ok := map[string]cmpOp{"gt": cmpGt, "gte": cmpGte, "lt": cmpLt, "lte": cmpLte, "eq": cmpEq}[k]
		if !ok {
			if k == "neq" {
				c.errf(vals[i].Line, p, "neq is not supported")
			} else {
				c.errf(vals[i].Line, p, "unknown condition criterion (gt, gte, lt, lte, eq, field)")
			}
			continue
		}
		x, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || x < 0 {
			c.errf(vals[i].Line, p, "%q is not a count", s)
			continue
		}
		lower = lower || op == cmpGt || op == cmpGte || op == cmpEq
		spec.Condition = append(spec.Condition, Bound{Op: k, N: x})
		corr.conds = append(corr.conds, cond{op, x})
	}
	if len(corr.conds) == 0 {
		c.errf(n.Line, "correlation.condition", "needs one of gt, gte, lt, lte, eq")
	} else if !lower {
		// A stream is judged as each event arrives; a count only bounded
		// above would hold from the first event on.
		c.errf(n.Line, "correlation.condition", "needs a lower bound (gt, gte or eq): an upper bound alone cannot be judged on a stream")
	}
}

// Defaults of the correlation state's bounds. At about 48 bytes an
// entry, one correlation holds at most 12 MiB of windows by default.
const (
	DefaultMaxGroups = 1024
	DefaultMaxWindow = 256
)

// corrEntry is one matching event held in a group's window. The value of
// value_count's field is kept as its hash, so a window's size does not
// depend on what the agent put in the field.
type corrEntry struct {
	ts   time.Time
	seq  uint64
	base int32
	has  bool
	val  uint64
}

type corrGroup struct {
	key     uint64
	entries []corrEntry
}

// corrState is one correlation's groups, bounded: the least recently
// used group is evicted past maxGroups, the oldest entry of a window past
// the window's bound; both are counted. Groups are keyed by a hash of the
// session and the group-by values, seeded per Evaluator, so the keys cost
// the same whatever the values are and cannot be aimed at a collision.
type corrState struct {
	c      *correlation
	groups map[uint64]*list.Element
	lru    list.List
	window int
}

// windowFor is the window bound of a correlation: the Evaluator's, but
// never below the count the condition needs, which a smaller window could
// never reach.
func windowFor(c *correlation, maxWindow int) int {
	w := maxWindow
	for _, cd := range c.conds {
		need := int(min(cd.n, 1<<20))
		if cd.op == cmpGt {
			need++
		}
		if cd.op != cmpLt && cd.op != cmpLte {
			w = max(w, need)
		}
	}
	return w
}

func (ev *Evaluator) correlate(cs *corrState, base *Rule, e *event.Event) {
	c := cs.c
	bi := slices.Index(c.bases, base)
	var h maphash.Hash
	h.SetSeed(ev.seed)
	h.WriteString(e.SessionID)
	for _, f := range c.groupBy[bi] {
		h.WriteByte(0)
		writeText(&h, f, f.get(&ev.v), false)
	}
	key := h.Sum64()
	var g *corrGroup
	if el, ok := cs.groups[key]; ok {
		cs.lru.MoveToFront(el)
		g = el.Value.(*corrGroup)
	} else {
		for len(cs.groups) >= ev.maxGroups {
			old := cs.lru.Back()
			cs.lru.Remove(old)
			delete(cs.groups, old.Value.(*corrGroup).key)
			ev.stats.GroupEvictions++
		}
		g = &corrGroup{key: key}
		cs.groups[key] = cs.lru.PushFront(g)
	}
	// Drop what fell out of the window.
	from := e.TS.Add(-c.spec.Timespan)
	drop := 0
	for drop < len(g.entries) && g.entries[drop].ts.Before(from) {
		drop++
	}
	if len(g.entries)-drop >= cs.window {
		ev.stats.WindowDrops += uint64(len(g.entries) - drop - cs.window + 1)
		drop = len(g.entries) - cs.window + 1
	}
	if drop > 0 {
		g.entries = append(g.entries[:0], g.entries[drop:]...)
	}
	ent := corrEntry{ts: e.TS, seq: e.Seq, base: int32(bi)}
	if f := c.field[bi]; f != nil {
		if val := f.get(&ev.v); val.present {
			h.Reset()
			writeText(&h, f, val, true)
			ent.val, ent.has = h.Sum64(), true
		}
	}
	g.entries = append(g.entries, ent)
	if !c.holds(g.entries) {
		return
	}
	seqs := make([]uint64, len(g.entries))
	for i, x := range g.entries {
		seqs[i] = x.seq
	}
	ev.out = append(ev.out, newMatch(c.r, seqs))
	// The group starts over, so one burst raises one match.
	g.entries = g.entries[:0]
}

// holds reports whether the condition holds of a window.
func (c *correlation) holds(entries []corrEntry) bool {
	var count int64
	switch c.spec.Type {
	case EventCount:
		count = int64(len(entries))
	case ValueCount:
		seen := make(map[uint64]struct{}, len(entries))
		for _, x := range entries {
			if x.has {
				seen[x.val] = struct{}{}
			}
		}
		count = int64(len(seen))
	case Temporal:
		seen := make(map[int32]struct{}, len(c.bases))
		for _, x := range entries {
			seen[x.base] = struct{}{}
		}
		count = int64(len(seen))
	}
	for _, cd := range c.conds {
		if !cd.op.test(count, cd.n) {
			return false
		}
	}
	return true
}

// writeText hashes a field's value as text (lower-cased when fold is
// set, for distinct values compared case-insensitively).
func writeText(h *maphash.Hash, f *field, v value, fold bool) {
	if !v.present {
		h.WriteByte(1)
		return
	}
	h.WriteByte(2)
	s := text(f, v)
	if fold {
		s = strings.ToLower(s)
	}
	h.WriteString(s)
}

// text is a field's value as text, for group keys and distinct values.
func text(f *field, v value) string {
	if !v.present {
		return ""
	}
	switch f.typ {
	case tStrs:
		return strings.Join(v.list, "\x00")
	case tInt, tBool:
		return formatInt(v.n)
	}
	return v.s
}
