package policies

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalid is wrapped by every FieldError.
var ErrInvalid = errors.New("policy: invalid")

// FieldError is one problem in a policy file.
type FieldError struct {
	// File is the file name as given to Parse, or empty.
	File string `json:"file,omitempty"`
	// Line is the 1-based line, or 0 when the field is not in the file.
	Line int `json:"line,omitempty"`
	// Field is the field path, such as "cooldown.min_age" or
	// "blocklist[2].purl". It is empty only for YAML syntax errors.
	Field string `json:"field,omitempty"`
	// Msg says what is wrong.
	Msg string `json:"message"`
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Errors is every problem found in a policy, ordered by line. It is the error
// that Load, Parse and Validate return.
type Errors []*FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the individual errors, so errors.Is(err, ErrInvalid) holds.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// errs collects field errors during validation.
type errs struct {
	list Errors
}

func (c *errs) add(field, format string, args ...any) {
	c.list = append(c.list, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// result attaches file and lines and returns the sorted errors, or nil.
func (c *errs) result(file string, lines map[string]int) error {
	if len(c.list) == 0 {
		return nil
	}
	for _, e := range c.list {
		e.File = file
		if e.Line == 0 && lines != nil {
			e.Line = lineOf(lines, e.Field)
		}
	}
	slices.SortStableFunc(c.list, func(a, b *FieldError) int {
		return cmp.Compare(a.Line, b.Line)
	})
	return c.list
}

// lineOf finds the line of field, or of its nearest enclosing field that is
// in the file.
func lineOf(lines map[string]int, field string) int {
	for f := field; f != ""; f = parentField(f) {
		if l, ok := lines[f]; ok {
			return l
		}
	}
	return 0
}

// parentField strips the last ".key" or "[i]" of a field path.
func parentField(f string) string {
	if strings.HasSuffix(f, "]") {
		if i := strings.LastIndexByte(f, '['); i >= 0 {
			return f[:i]
		}
	}
	if i := strings.LastIndexByte(f, '.'); i >= 0 {
		return f[:i]
	}
	return ""
}
