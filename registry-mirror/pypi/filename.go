package pypi

import (
	"fmt"
	"strings"

	"github.com/sandtrail/sandtrail/resolver"
)

// sdistExts are the archive extensions of source distributions that pip
// installs, longest first where one ends another.
var sdistExts = []string{".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".zip", ".tar"}

// metadataExt ends a PEP 658 core metadata file's name.
const metadataExt = ".metadata"

// checkFilename accepts a plain file name: no path, no leading dot, no
// control characters, at most 255 bytes.
func checkFilename(name string) error {
	if name == "" || len(name) > 255 || name[0] == '.' || strings.ContainsAny(name, "/\\") ||
		strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return fmt.Errorf("%w: %.120q", ErrBadFilename, name)
	}
	return nil
}

// fileVersion reads the version from the name of a file of project name
// (in normal form): a wheel's second field
// ({name}-{version}(-{build})?-{python}-{abi}-{platform}.whl), or what
// follows the name in an sdist ({name}-{version}.tar.gz). The version
// must be PEP 440's, and the file's name the project's.
func fileVersion(eco *resolver.Ecosystem, name, filename string) (version string, sdist bool, err error) {
	if stem, ok := strings.CutSuffix(filename, ".whl"); ok {
		parts := strings.Split(stem, "-")
		if (len(parts) != 5 && len(parts) != 6) || eco.NormalizeName(parts[0]) != name {
			return "", false, fmt.Errorf("%w: %.120q is not a wheel of %s", ErrBadFilename, filename, name)
		}
		version = parts[1]
	} else {
		version, err = sdistVersion(eco, name, filename)
		if err != nil {
			return "", false, err
		}
		sdist = true
	}
	if _, err := eco.ParseVersion(version); err != nil {
		return "", false, fmt.Errorf("%w: %.120q: %w", ErrBadFilename, filename, err)
	}
	return version, sdist, nil
}

// sdistVersion reads the version of an sdist's name: the project's name
// may hold dashes (python-dateutil-2.8.2.tar.gz), so the version is what
// follows the dash after which the name, normalised, is the project's.
func sdistVersion(eco *resolver.Ecosystem, name, filename string) (string, error) {
	for _, ext := range sdistExts {
		stem, ok := strings.CutSuffix(filename, ext)
		if !ok {
			continue
		}
		for i := range len(stem) {
			if stem[i] == '-' && eco.NormalizeName(stem[:i]) == name && i+1 < len(stem) {
				return stem[i+1:], nil
			}
		}
		break
	}
	return "", fmt.Errorf("%w: %.120q is not a distribution of %s", ErrBadFilename, filename, name)
}
