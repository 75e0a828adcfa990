package sigma

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
)

// Set is a loaded, linked set of rules, indexed by event kind. It is
// immutable and may be shared by many Evaluators.
type Set struct {
	rules    []*Rule
	byKind   map[string][]*Rule
	byPrefix map[string][]*Rule
	corrs    []*correlation
}

// Rules returns the rules in load order.
func (s *Set) Rules() []*Rule { return slices.Clone(s.rules) }

var knownKinds = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range event.Kinds {
		m[k] = true
	}
	return m
}()

// rulesFor returns the detection rules an event of the kind meets: those
// of its category, and no other.
func (s *Set) rulesFor(kind string) []*Rule {
	if rs, ok := s.byKind[kind]; ok || knownKinds[kind] {
		return rs
	}
	c, _, ok := strings.Cut(kind, ".")
	if !ok {
		return nil
	}
	return s.byPrefix[c+"."]
}

// build compiles and links the rules of every file.
func build(files []file) (*Set, error) {
	var rules []*Rule
	var comps []*compiler
	var errs []error
	for _, f := range files {
		rs, cs, es := parseFile(f.name, f.data)
		rules = append(rules, rs...)
		comps = append(comps, cs...)
		errs = append(errs, es...)
	}
	s := &Set{byKind: map[string][]*Rule{}, byPrefix: map[string][]*Rule{}}
	byRef := map[string]*Rule{}
	for _, r := range rules {
		for _, ref := range []string{r.ID, r.Name} {
			if ref == "" {
				continue
			}
			if o, ok := byRef[ref]; ok && o != r {
				errs = append(errs, &Error{File: r.File, Rule: name(r), Field: "id",
					Msg: fmt.Sprintf("%q is also the id or name of a rule of %s", ref, o.File)})
				continue
			}
			byRef[ref] = r
		}
	}
	for i, c := range comps {
		if c.corr == nil {
			continue
		}
		corr, es := c.linkCorrelation(byRef)
		errs = append(errs, es...)
		if corr != nil {
			rules[i].Correlation = corr.spec
			s.corrs = append(s.corrs, corr)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, r := range rules {
		if len(r.corrs) > 0 {
			r.standalone = false
			for _, c := range r.corrs {
				r.standalone = r.standalone || c.spec.Generate
			}
		}
	}
	for _, r := range rules {
		s.rules = append(s.rules, r)
		if r.cat == nil {
			continue
		}
		for _, k := range r.cat.kinds {
			s.byKind[k] = append(s.byKind[k], r)
		}
		if r.cat.prefix != "" {
			s.byPrefix[r.cat.prefix] = append(s.byPrefix[r.cat.prefix], r)
		}
	}
	return s, nil
}

func name(r *Rule) string {
	c := compiler{r: r}
	return c.ruleName()
}
