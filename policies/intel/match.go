package intel

import (
	"slices"

	"github.com/sandtrail/sandtrail/resolver"
)

// matcher decides which versions of one affected package a record lists,
// with the version grammar of the package's ecosystem (package resolver):
// the one grammar sandtrail compares versions with.
type matcher struct {
	every    bool
	versions []string
	parsed   []resolver.Version // versions that parse, compared by order
	ranges   [][]rangeStep      // each range's events, sorted by version
}

// rangeStep is one event of a range with its version parsed; introduced
// "0" has v nil and sorts first.
type rangeStep struct {
	kind string // introduced, fixed, last_affected, limit
	v    resolver.Version
}

// newMatcher compiles a. A range with an event version that its ecosystem
// cannot parse matches nothing (it cannot be ordered); listed versions
// still match as written.
func newMatcher(a *Affected) *matcher {
	m := &matcher{every: a.Every(), versions: a.Versions}
	if m.every {
		return m
	}
	eco, err := resolver.Lookup(a.Ecosystem)
	if err != nil || !eco.HasRanges() {
		return m
	}
	for _, v := range a.Versions {
		if pv, err := eco.ParseVersion(v); err == nil {
			m.parsed = append(m.parsed, pv)
		}
	}
	for _, r := range a.Ranges {
		if steps, ok := compileRange(eco, r); ok {
			m.ranges = append(m.ranges, steps)
		}
	}
	return m
}

func compileRange(eco *resolver.Ecosystem, r Range) ([]rangeStep, bool) {
	steps := make([]rangeStep, 0, len(r.Events))
	for _, ev := range r.Events {
		kind, raw := "introduced", ev.Introduced
		switch {
		case ev.Fixed != "":
			kind, raw = "fixed", ev.Fixed
		case ev.LastAffected != "":
			kind, raw = "last_affected", ev.LastAffected
		case ev.Limit != "":
			kind, raw = "limit", ev.Limit
		}
		st := rangeStep{kind: kind}
		if !(kind == "introduced" && raw == "0") {
			v, err := eco.ParseVersion(raw)
			if err != nil {
				return nil, false
			}
			st.v = v
		}
		steps = append(steps, st)
	}
	slices.SortStableFunc(steps, func(a, b rangeStep) int {
		switch {
		case a.v == nil && b.v == nil:
			return 0
		case a.v == nil:
			return -1
		case b.v == nil:
			return 1
		}
		return a.v.Compare(b.v)
	})
	return steps, true
}

// match reports whether version is listed. An empty version (not yet
// resolved) matches only a record of every version. A version its
// ecosystem cannot parse matches only as written in versions[].
func (m *matcher) match(eco *resolver.Ecosystem, version string) bool {
	if m.every {
		return true
	}
	if version == "" {
		return false
	}
	if slices.Contains(m.versions, version) {
		return true
	}
	if eco == nil || (len(m.parsed) == 0 && len(m.ranges) == 0) {
		return false
	}
	v, err := eco.ParseVersion(version)
	if err != nil {
		return false
	}
	for _, p := range m.parsed {
		if p.Compare(v) == 0 {
			return true
		}
	}
	for _, steps := range m.ranges {
		if inRange(steps, v) {
			return true
		}
	}
	return false
}

// inRange evaluates one range as the OSV schema's evaluation does: walk
// the events in version order; an introduced at or below v makes it
// affected, a fixed at or below v, or a last_affected below v, makes it
// not; a limit at or below v puts v outside the range.
func inRange(steps []rangeStep, v resolver.Version) bool {
	affected := false
	for _, st := range steps {
		switch st.kind {
		case "introduced":
			if st.v == nil || st.v.Compare(v) <= 0 {
				affected = true
			}
		case "fixed":
			if st.v.Compare(v) <= 0 {
				affected = false
			}
		case "last_affected":
			if st.v.Compare(v) < 0 {
				affected = false
			}
		case "limit":
			if st.v.Compare(v) <= 0 {
				return false
			}
		}
	}
	return affected
}
