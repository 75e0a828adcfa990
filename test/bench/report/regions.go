package main

import (
	"fmt"
	"strings"
)

// A region of docs/benchmarks.md is generated: it starts with a line
// "<!-- bench:KEY -->" and ends with the line "<!-- /bench -->". KEY is a
// regexp of benchmark names, or one of the names of specialRegions.
const (
	regionOpen  = "<!-- bench:"
	regionClose = "<!-- /bench -->"
)

// regionKey returns the key of a region's opening line, and whether line
// is one.
func regionKey(line string) (string, bool) {
	l := strings.TrimSpace(line)
	if !strings.HasPrefix(l, regionOpen) || !strings.HasSuffix(l, "-->") {
		return "", false
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(l, regionOpen), "-->")), true
}

// regionKeys returns the keys of doc's regions, in order.
func regionKeys(doc string) ([]string, error) {
	var keys []string
	_, err := replaceRegions(doc, func(key string) (string, bool, error) {
		keys = append(keys, key)
		return "", false, nil
	})
	return keys, err
}

// replaceRegions returns doc with the body of each region replaced by
// what gen returns for its key (gen's false: keep the body as it is).
// Everything outside the regions stays as it was. It returns an error for
// a region that is not closed, a close without an open, a region inside
// another and a region without a key.
func replaceRegions(doc string, gen func(key string) (body string, ok bool, err error)) (string, error) {
	lines := strings.SplitAfter(doc, "\n")
	var out strings.Builder
	key, open, start := "", 0, 0 // open: the line number of the region's opening line, or 0
	for i, line := range lines {
		k, isOpen := regionKey(line)
		isClose := strings.TrimSpace(line) == regionClose
		switch {
		case isOpen && open != 0:
			return "", fmt.Errorf("line %d: region %q opens inside region %q (line %d)", i+1, k, key, open)
		case isOpen && k == "":
			return "", fmt.Errorf("line %d: region without a key", i+1)
		case isOpen:
			key, open, start = k, i+1, i+1
			out.WriteString(line)
		case isClose && open == 0:
			return "", fmt.Errorf("line %d: %s without a region", i+1, regionClose)
		case isClose:
			body, ok, err := gen(key)
			if err != nil {
				return "", fmt.Errorf("region %q (line %d): %w", key, open, err)
			}
			if !ok {
				body = strings.Join(lines[start:i], "")
			}
			out.WriteString(body)
			if body != "" && !strings.HasSuffix(body, "\n") {
				out.WriteString("\n")
			}
			out.WriteString(line)
			open = 0
		case open == 0:
			out.WriteString(line)
		}
	}
	if open != 0 {
		return "", fmt.Errorf("line %d: region %q is not closed (%s)", open, key, regionClose)
	}
	return out.String(), nil
}
