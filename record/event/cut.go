package event

import "unicode/utf8"

// Cut returns the first at most n bytes of s, not splitting a UTF-8
// character: the bound of an untrusted value that is kept (stored, or
// sent on), where a mark would change the value.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// Clip returns s cut to at most its first n bytes (Cut), with "…" after a
// cut. It escapes nothing: it bounds an untrusted value that an error
// message quotes (%q escapes it), not a line for a terminal.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Cut(s, n) + "…"
}
