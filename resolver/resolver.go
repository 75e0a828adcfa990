// Package resolver is the registry of the package ecosystems that sandtrail records (npm,
// PyPI, Cargo, Debian and OCI) and the one home of their facts: each is an [Ecosystem] in the
// ordered list of [Ecosystems], with its name and purl type, its package manager, how it
// normalizes names, what a purl namespace means, how its registry lists versions, and the
// syntax of its exact versions and ranges. [ParseRef] reads the ECOSYSTEM:NAME[@SPEC] form
// that the command line uses.
//
// It also parses versions and version specs, orders versions the way each ecosystem's own tools
// do, and picks the best candidate for a spec. One API serves every ecosystem: [Match], [Best],
// [Pick] and [Compare] take the ecosystem's name ("npm", "pypi", "cargo", "deb"); the rules
// themselves live in the subpackages npm, cargo, pep440 and deb. OCI versions are tags, with
// no order and no ranges.
//
// Inputs are untrusted (they come from argv, lockfiles and registries), so every parser returns
// an error for bad input rather than guessing, and every parser has a fuzz target.
package resolver

import (
	"errors"
	"fmt"
)

// ErrNoMatch is returned by [Best] when no candidate satisfies the spec.
var ErrNoMatch = errors.New("resolver: no version matches")

// ErrUnknownEcosystem is returned for an ecosystem name that is not in [Ecosystems].
var ErrUnknownEcosystem = errors.New("resolver: unknown ecosystem")

// ErrNoOrder is returned when versions of an ecosystem without ranges (OCI tags) are parsed
// or compared.
var ErrNoOrder = errors.New("resolver: versions are tags, with no order")

// A Version is one parsed version. Compare orders it against another Version of the same
// ecosystem (-1, 0, +1); comparing versions of different ecosystems panics.
type Version interface {
	String() string
	Compare(Version) int
}

// A Spec is one parsed version spec.
type Spec interface {
	Match(Version) bool
	String() string
}

// A Selector is an optional ability of a Spec whose ecosystem picks the best candidate by a
// rule other than "the highest version that matches" (PEP 440 falls back to pre-releases when
// no final release matches). Select returns the index of the chosen candidate, or -1.
type Selector interface {
	Select(candidates []Version) int
}

// Match reports whether version satisfies spec in the given ecosystem. It returns an error if
// the ecosystem is unknown or either string does not parse.
func Match(ecosystem, spec, version string) (bool, error) {
	e, err := Lookup(ecosystem)
	if err != nil {
		return false, err
	}
	s, err := e.ParseSpec(spec)
	if err != nil {
		return false, fmt.Errorf("parsing %s spec: %w", ecosystem, err)
	}
	v, err := e.ParseVersion(version)
	if err != nil {
		return false, fmt.Errorf("parsing %s version: %w", ecosystem, err)
	}
	return s.Match(v), nil
}

// Best returns the candidate that the ecosystem's own tool would pick for spec: the highest
// matching version, except where the ecosystem says otherwise (see [Selector]). Candidates that do
// not parse are skipped, as registries' clients skip them. The candidate is returned exactly as
// given. Best returns ErrNoMatch if nothing matches, and an error if the ecosystem is unknown or
// the spec does not parse.
func Best(ecosystem, spec string, candidates []string) (string, error) {
	e, err := Lookup(ecosystem)
	if err != nil {
		return "", err
	}
	s, err := e.ParseSpec(spec)
	if err != nil {
		return "", fmt.Errorf("parsing %s spec: %w", ecosystem, err)
	}
	vs := make([]Version, 0, len(candidates))
	raw := make([]string, 0, len(candidates))
	for _, c := range candidates {
		v, err := e.ParseVersion(c)
		if err != nil {
			continue
		}
		vs = append(vs, v)
		raw = append(raw, c)
	}
	i := BestOf(s, vs)
	if i < 0 {
		return "", fmt.Errorf("choosing %s version for %q among %d candidates: %w", ecosystem, spec, len(candidates), ErrNoMatch)
	}
	return raw[i], nil
}

// BestOf returns the index of the best of candidates for s, or -1 if none matches. It uses the
// spec's [Selector] if it has one, and otherwise the highest matching version (the first of
// equal ones).
func BestOf(s Spec, candidates []Version) int {
	if sel, ok := s.(Selector); ok {
		return sel.Select(candidates)
	}
	best := -1
	for i, v := range candidates {
		if !s.Match(v) {
			continue
		}
		if best < 0 || v.Compare(candidates[best]) > 0 {
			best = i
		}
	}
	return best
}

// Compare orders two versions of the given ecosystem: -1 if a < b, 0 if equal, +1 if a > b. It
// returns an error if the ecosystem is unknown or either version does not parse.
func Compare(ecosystem, a, b string) (int, error) {
	e, err := Lookup(ecosystem)
	if err != nil {
		return 0, err
	}
	va, err := e.ParseVersion(a)
	if err != nil {
		return 0, fmt.Errorf("parsing %s version: %w", ecosystem, err)
	}
	vb, err := e.ParseVersion(b)
	if err != nil {
		return 0, fmt.Errorf("parsing %s version: %w", ecosystem, err)
	}
	return va.Compare(vb), nil
}
