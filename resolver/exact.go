package resolver

import (
	"regexp"
	"strings"
)

var (
	semverRe = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$`)
	plainRe  = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_:~!-]*$`)
)

// exactSemver reads a full semver version (npm, Cargo), without a leading v.
func exactSemver(spec string) (string, bool) {
	if semverRe.MatchString(spec) {
		return strings.TrimPrefix(spec, "v"), true
	}
	return "", false
}

// exactPEP440 reads a PyPI version, alone or after == (without a wildcard) or ===.
func exactPEP440(spec string) (string, bool) {
	v := spec
	if rest, ok := strings.CutPrefix(v, "==="); ok {
		v = rest
	} else if rest, ok := strings.CutPrefix(v, "=="); ok && !strings.Contains(rest, "*") {
		v = rest
	}
	v = strings.TrimSpace(v)
	if plainRe.MatchString(v) && !strings.ContainsAny(v, ",") {
		return v, true
	}
	return "", false
}

// exactPlain reads a Debian version or an OCI tag or digest.
func exactPlain(spec string) (string, bool) {
	if plainRe.MatchString(spec) {
		return spec, true
	}
	return "", false
}
