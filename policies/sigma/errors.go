package sigma

import (
	"fmt"
	"strings"
)

// Error is one problem with one rule, found while loading. Load joins them
// (errors.Join), so every problem of every file is reported at once.
type Error struct {
	// File is the file's name as Load was given it.
	File string
	// Line is the line of the YAML node at fault, when known.
	Line int
	// Rule names the rule: its title, and its id in parentheses, as far
	// as the file got before the problem.
	Rule string
	// Field is the path of the rule attribute at fault, such as
	// "detection.selection.CommandLine|contains" or "logsource".
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Rule != "" {
		fmt.Fprintf(&b, "rule %s: ", e.Rule)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}
