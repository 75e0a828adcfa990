package sigma

import (
	"container/list"
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
	var condNode *yaml.Node
	if c.generate != nil {
		keys, vals = append(keys, "generate"), append(vals, c.generate)
	}
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
			ts, _ := c.scalar(p, v)
			m := timespanRE.FindStringSubmatch(ts)
			if m == nil {
				c.errf(v.Line, p, "%q is not a number and one of s, m, h, d (10m)", ts)
				continue
			}
			n, _ := strconv.Atoi(m[1])
			unit := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[m[2]]
			spec.Timespan = time.Duration(n) * unit
		case "condition":
			condNode = v
		case "generate":
			s, _ := c.scalar(p, v)
			switch s {
			case "true":
				spec.Generate = true
			case "false":
			default:
				c.errf(v.Line, p, "must be true or false")
			}
		case "aliases":
			c.errf(v.Line, p, "field name aliases are not supported")
		default:
			c.errf(v.Line, p, "unknown correlation attribute")
		}
	}
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
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	for _, ref := range spec.Rules {
		b := byRef[ref]
		switch {
		case b == nil:
			c.errf(c.corr.Line, "correlation.rules", "%q is the id or name of no rule loaded with it", ref)
			continue
		case b.cat == nil:
			c.errf(c.corr.Line, "correlation.rules", "%q is a correlation rule: chains of correlations are not supported", ref)
			continue
		case slices.Contains(corr.bases, b):
			c.errf(c.corr.Line, "correlation.rules", "%q is listed twice", ref)
			continue
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

// Defaults of the correlation state's bounds.
const (
	DefaultMaxGroups = 4096
	DefaultMaxWindow = 1024
)

// corrEntry is one matching event held in a group's window.
type corrEntry struct {
	ts   time.Time
	seq  uint64
	base int
	val  string
	has  bool
}

type corrGroup struct {
	key     string
	entries []corrEntry
}

// corrState is one correlation's groups, bounded: the least recently
// used group is evicted past maxGroups, the oldest entry of a window past
// maxWindow; both are counted.
type corrState struct {
	c      *correlation
	groups map[string]*list.Element
	lru    list.List
}

func (ev *Evaluator) correlate(cs *corrState, base *Rule, e *event.Event) {
	c := cs.c
	bi := slices.Index(c.bases, base)
	var kb strings.Builder
	kb.WriteString(e.SessionID)
	for _, f := range c.groupBy[bi] {
		kb.WriteByte(0)
		kb.WriteString(text(f, f.get(&ev.v)))
	}
	key := kb.String()
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
	g.entries = g.entries[drop:]
	if len(g.entries) >= ev.maxWindow {
		g.entries = g.entries[1:]
		ev.stats.WindowDrops++
	}
	ent := corrEntry{ts: e.TS, seq: e.Seq, base: bi}
	if f := c.field[bi]; f != nil {
		if val := f.get(&ev.v); val.present {
			ent.val, ent.has = text(f, val), true
		}
	}
	g.entries = append(g.entries, ent)
	var count int64
	switch c.spec.Type {
	case EventCount:
		count = int64(len(g.entries))
	case ValueCount:
		seen := map[string]bool{}
		for _, x := range g.entries {
			if x.has {
				seen[strings.ToLower(x.val)] = true
			}
		}
		count = int64(len(seen))
	case Temporal:
		seen := map[int]bool{}
		for _, x := range g.entries {
			seen[x.base] = true
		}
		count = int64(len(seen))
	}
	for _, cd := range c.conds {
		if !cd.op.test(count, cd.n) {
			return
		}
	}
	seqs := make([]uint64, len(g.entries))
	for i, x := range g.entries {
		seqs[i] = x.seq
	}
	ev.out = append(ev.out, newMatch(c.r, seqs))
	// The group starts over, so one burst raises one match.
	g.entries = nil
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
