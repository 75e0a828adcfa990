package resolver

import (
	"errors"
	"fmt"
	"strings"
)

// ErrBadRef is wrapped by every error of [ParseRef].
var ErrBadRef = errors.New("resolver: bad package reference")

// ErrNotRef is wrapped by the error of [ParseRef] for a string with no ECOSYSTEM: prefix, so
// that callers can say which forms they accept.
var ErrNotRef = errors.New("resolver: not ECOSYSTEM:NAME[@SPEC]")

// A Ref is a package as a user names it on a command line: ECOSYSTEM:NAME[@SPEC].
type Ref struct {
	// Ecosystem is the registered ecosystem.
	Ecosystem *Ecosystem
	// Name is the package name as written (not normalized), checked by [Ecosystem.CheckName].
	Name string
	// Spec is the version spec as written, without surrounding spaces; empty when none is
	// given.
	Spec string
}

// String returns r as ECOSYSTEM:NAME[@SPEC].
func (r Ref) String() string {
	s := r.Ecosystem.Name() + ":" + r.Name
	if r.Spec != "" {
		s += "@" + r.Spec
	}
	return s
}

// ParseRef parses ECOSYSTEM:NAME[@SPEC], such as npm:lodash@^4.17.0,
// npm:@babel/core@7.24.0 or pypi:requests@>=2,<3. The rule:
//
//   - ECOSYSTEM runs to the first colon. It is case-insensitive and must be registered.
//   - NAME runs to the first @ after its first character, so that the @ of an npm scope
//     belongs to the name (@babel/core@^7 is @babel/core, ^7), and SPEC is everything after
//     that @, which may itself hold @ (npm:x@npm:y@1 is x, npm:y@1).
//   - No @ means no spec (Spec is ""): callers that allow it read it as any version. An @
//     followed by nothing (or only spaces) is an error, because it is usually a variable that
//     expanded to nothing.
//   - NAME must pass the ecosystem's [Ecosystem.CheckName].
//
// Purls (pkg:TYPE/NAME@VERSION) are not refs; callers that accept both look for "pkg:" first.
// Every error wraps ErrBadRef; one for a string without an ECOSYSTEM: prefix also wraps
// ErrNotRef, and one for an unknown ecosystem also wraps ErrUnknownEcosystem. The error's text
// says what is wrong without repeating s, so that callers can prefix it.
func ParseRef(s string) (Ref, error) {
	eco, rest, ok := strings.Cut(s, ":")
	if !ok || eco == "" {
		return Ref{}, refError{"want ECOSYSTEM:NAME[@SPEC]", ErrNotRef}
	}
	eco = strings.ToLower(eco)
	e, err := Lookup(eco)
	if err != nil {
		why := fmt.Sprintf("unknown ecosystem %q (want one of %s)", eco, strings.Join(Names(), ", "))
		return Ref{}, refError{why, ErrUnknownEcosystem}
	}
	name, spec, hasSpec := splitSpec(rest)
	if hasSpec && spec == "" {
		return Ref{}, refError{"empty version after @", nil}
	}
	if err := e.CheckName(name); err != nil {
		return Ref{}, refError{err.Error(), nil}
	}
	return Ref{Ecosystem: e, Name: name, Spec: spec}, nil
}

// splitSpec splits NAME[@SPEC] at the first @ after the name's first character.
func splitSpec(s string) (name, spec string, ok bool) {
	if s == "" {
		return "", "", false
	}
	i := strings.IndexByte(s[1:], '@')
	if i < 0 {
		return s, "", false
	}
	return s[:i+1], strings.TrimSpace(s[i+2:]), true
}

// A refError is an error of ParseRef: why is its text, and it wraps ErrBadRef and err.
type refError struct {
	why string
	err error
}

func (e refError) Error() string { return e.why }

func (e refError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrBadRef}
	}
	return []error{ErrBadRef, e.err}
}
