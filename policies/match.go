package policies

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sandtrail/sandtrail/resolver"
)

// ParsePackageRef parses one package as the policy is asked about it:
// ECOSYSTEM:NAME[@SPEC] (resolver.ParseRef; no @ means any version) or a
// purl (ParsePurl), which must name one package, not a pattern. spec is
// the version or range as written.
func ParsePackageRef(s string) (eco, name, spec string, err error) {
	if strings.HasPrefix(s, "pkg:") {
		p, err := ParsePurl(s)
		if err != nil {
			return "", "", "", err
		}
		if p.IsGlob() {
			return "", "", "", fmt.Errorf("%q: explain needs one package, not a pattern", s)
		}
		return p.Type, p.Name, p.Version, nil
	}
	r, err := resolver.ParseRef(s)
	if errors.Is(err, resolver.ErrNotRef) {
		return "", "", "", fmt.Errorf("%q: want ECOSYSTEM:NAME@SPEC, such as npm:lodash@^4.17.0", s)
	}
	if err != nil {
		return "", "", "", fmt.Errorf("%q: %w", s, err)
	}
	return r.Ecosystem.Name(), r.Name, r.Spec, nil
}
