package deb

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
)

// field is one field of a control paragraph (deb822): its name as
// written, and its value: the first line's text, then each continuation
// line after a newline, each trimmed of surrounding blanks.
type field struct {
	name  string
	value string
}

// scanner reads control paragraphs (Release, Packages) from untrusted
// bytes, streaming, with every size bounded: a line, a paragraph and the
// fields of a paragraph. Only the fields keep names are kept; the others
// are checked for syntax and dropped, so a Packages file's long
// descriptions cost nothing.
type scanner struct {
	sc        *bufio.Scanner
	keep      func(name string) bool
	maxPara   int
	line      int // lines read
	maxFields int
}

// newScanner reads r, with lines of at most maxLine bytes and paragraphs
// of at most maxPara bytes.
func newScanner(r io.Reader, maxLine, maxPara int, keep func(string) bool) *scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(maxLine, 64<<10)), maxLine)
	return &scanner{sc: sc, keep: keep, maxPara: maxPara, maxFields: 1024}
}

// next returns the next paragraph's kept fields and the line it starts
// on; io.EOF when there are no more. A malformed paragraph is an error
// that wraps ErrSyntax and names the line.
func (s *scanner) next() ([]field, int, error) {
	var (
		fields []field
		names  = map[string]bool{}
		size   int
		start  int
		cur    = -1 // index in fields of the field continuation lines extend; -2: a dropped one
		cont   strings.Builder
	)
	flush := func() {
		if cur >= 0 && cont.Len() > 0 {
			fields[cur].value += cont.String()
		}
		cont.Reset()
	}
	for s.sc.Scan() {
		s.line++
		raw := bytes.TrimRight(s.sc.Bytes(), " \t\r")
		if len(raw) == 0 {
			if start == 0 {
				continue // blank lines between paragraphs
			}
			flush()
			return fields, start, nil
		}
		if start == 0 {
			start = s.line
		}
		if size += len(raw) + 1; size > s.maxPara {
			return nil, start, fmt.Errorf("%w: paragraph at line %d is longer than %d bytes", ErrSyntax, start, s.maxPara)
		}
		if raw[0] == ' ' || raw[0] == '\t' {
			if cur == -1 {
				return nil, start, fmt.Errorf("%w: line %d: a continuation line before any field", ErrSyntax, s.line)
			}
			if cur >= 0 {
				cont.WriteByte('\n')
				cont.Write(bytes.TrimSpace(raw))
			}
			continue
		}
		flush()
		name, value, err := splitField(raw)
		if err != nil {
			return nil, start, fmt.Errorf("%w: line %d: %v", ErrSyntax, s.line, err)
		}
		lower := strings.ToLower(string(name))
		if names[lower] {
			return nil, start, fmt.Errorf("%w: line %d: field %s appears twice in one paragraph", ErrSyntax, s.line, event.Clip(lower, 80))
		}
		if names[lower] = true; len(names) > s.maxFields {
			return nil, start, fmt.Errorf("%w: paragraph at line %d has more than %d fields", ErrSyntax, start, s.maxFields)
		}
		cur = -2
		if s.keep(lower) {
			fields = append(fields, field{name: lower, value: string(value)})
			cur = len(fields) - 1
		}
	}
	if err := s.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, start, fmt.Errorf("%w: line %d is too long", ErrSyntax, s.line+1)
		}
		return nil, start, fmt.Errorf("reading control data: %w", err)
	}
	if start == 0 {
		return nil, 0, io.EOF
	}
	flush()
	return fields, start, nil
}

// splitField splits "Name: value". A name is printable ASCII without a
// colon, and does not begin with '-' or '#' (deb822).
func splitField(line []byte) ([]byte, []byte, error) {
	name, value, ok := bytes.Cut(line, []byte(":"))
	if !ok {
		return nil, nil, fmt.Errorf("%q is neither a field nor a continuation", event.Clip(string(line), 80))
	}
	if len(name) == 0 || name[0] == '-' || name[0] == '#' {
		return nil, nil, fmt.Errorf("bad field name %q", event.Clip(string(name), 80))
	}
	for _, c := range name {
		if c <= ' ' || c > '~' {
			return nil, nil, fmt.Errorf("bad field name %q", event.Clip(string(name), 80))
		}
	}
	return name, bytes.TrimSpace(value), nil
}

// get returns the value of the field named name (lower case).
func get(fields []field, name string) (string, bool) {
	for _, f := range fields {
		if f.name == name {
			return f.value, true
		}
	}
	return "", false
}

// isText reports whether b looks like control data rather than binary
// garbage: no NUL byte.
func isText(b []byte) bool { return bytes.IndexByte(b, 0) < 0 }
