package report

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// FileLine is a line of a terminal's list of the files a session touched.
type FileLine struct {
	Text      string
	Sensitive bool
}

// Lines are the paths as lines for a terminal: each sensitive path on its
// own line, always (they come first, those that succeeded before those
// that failed); then at most max lines of the others, each path or, for a
// directory holding more than two of them, the directory with their count,
// operations and errors, in the order of their first events. more counts
// the lines left out. Lines are not cleaned: the caller cleans them for
// its terminal.
func (f Files) Lines(max int) (lines []FileLine, more int) {
	byDir := map[string][]Path{}
	for _, p := range f.Paths {
		if !p.Sensitive {
			d := path.Dir(p.Path)
			byDir[d] = append(byDir[d], p)
		}
	}
	others := 0
	done := map[string]bool{}
	add := func(l FileLine) {
		if l.Sensitive || others < max {
			lines = append(lines, l)
		} else {
			more++
		}
		if !l.Sensitive {
			others++
		}
	}
	for _, p := range f.Paths {
		d := path.Dir(p.Path)
		switch {
		case p.Sensitive:
			add(FileLine{pathLine(p.Path, p.To, p.Ops, p.Errnos), true})
		case len(byDir[d]) > 2 && !done[d]:
			done[d] = true
			var ops, errnos []string
			for _, q := range byDir[d] {
				ops, errnos = union(ops, q.Ops), union(errnos, q.Errnos)
			}
			add(FileLine{pathLine(fmt.Sprintf("%s/ (%d paths)", d, len(byDir[d])), "", ops, errnos), false})
		case len(byDir[d]) <= 2:
			add(FileLine{pathLine(p.Path, p.To, p.Ops, p.Errnos), false})
		}
	}
	return lines, more
}

// pathLine is a path (with where it was renamed or linked to), its
// operations and its errors.
func pathLine(p, to string, ops, errnos []string) string {
	if to != "" {
		p += " → " + to
	}
	line := fmt.Sprintf("%-40s %s", p, strings.Join(ops, ","))
	if len(errnos) > 0 {
		line += " (" + strings.Join(errnos, ",") + ")"
	}
	return line
}

// union is a with b's values that it lacks appended.
func union(a, b []string) []string {
	for _, v := range b {
		if !slices.Contains(a, v) {
			a = append(a, v)
		}
	}
	return a
}
