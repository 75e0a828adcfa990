package resolver

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxNameLen is the longest package name [Ecosystem.CheckName] accepts (npm's limit, the
// longest of the ecosystems').
const MaxNameLen = 214

var pypiSeparators = regexp.MustCompile(`[-_.]+`)

// NormalizeName returns name as ecosystem compares package names, so that two spellings the
// ecosystem treats as one package become one string (see [Ecosystem.NormalizeName]). For an
// unknown ecosystem it returns name as written.
func NormalizeName(ecosystem, name string) string {
	e, err := Lookup(ecosystem)
	if err != nil {
		return name
	}
	return e.normalize(name)
}

// NormalizeName returns name as the ecosystem compares package names: PEP 503 for PyPI (lower
// case, runs of -, _ and . become -), lower case with - for _ for Cargo (crates.io treats them
// as the same crate), lower case for Debian and OCI, and the name as written for npm (whose
// names are case-sensitive).
func (e *Ecosystem) NormalizeName(name string) string { return e.normalize(name) }

func keepName(name string) string { return name }

func normalizePEP503(name string) string {
	return pypiSeparators.ReplaceAllString(strings.ToLower(name), "-")
}

func normalizeCrate(name string) string {
	return strings.ReplaceAll(strings.ToLower(name), "_", "-")
}

// CheckName returns an error if name cannot be a package name in the ecosystem: it is empty,
// longer than MaxNameLen, holds a space, a control character, a quote or a shell
// metacharacter, or starts with an @ that is not an npm @scope/name.
func (e *Ecosystem) CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("empty package name")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("package name longer than %d bytes", MaxNameLen)
	}
	if strings.ContainsFunc(name, badNameRune) {
		return fmt.Errorf("package name %q has a character names cannot have", name)
	}
	if strings.HasPrefix(name, "@") {
		if e.info.Namespace != Scope {
			return fmt.Errorf("only npm names have an @scope")
		}
		scope, n, ok := strings.Cut(name[1:], "/")
		if !ok || scope == "" || n == "" || strings.Contains(n, "/") {
			return fmt.Errorf("want a scoped npm name as @scope/name")
		}
	}
	return nil
}

func badNameRune(r rune) bool {
	return r < ' ' || r == 0x7f || strings.ContainsRune(" \"'`$;|&<>(){}", r)
}
