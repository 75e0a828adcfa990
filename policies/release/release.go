// Package release reads a package's published versions, with their publish
// times, from its registry: the npm packument, PyPI's JSON simple API
// (PEP 691, with PEP 700's upload-time) and the crates.io sparse index; the
// resolver registry says which of them an ecosystem's registry speaks
// (resolver.Ecosystem.Listing). It is small on purpose: `sandtrail policy
// explain` uses it to resolve a spec the way the ecosystem's client would,
// and to learn the publish time that the cooldown needs.
//
// The documents are read by resolver/listing, the one parser of each
// format, which the mirror uses too; ParseNpm, ParsePyPI and ParseCrates
// derive an Info from what it reads. Registry responses are untrusted
// input: the parsers cap what they read, never panic, and are fuzzed. They
// are stricter than the mirror about a document that is not whole: a
// publish time that does not parse, or an index line that does not, is an
// error here (ErrMalformed), where the mirror serves what it could read.
package release

import (
	"errors"
	"fmt"
	"time"

	"github.com/sandtrail/sandtrail/resolver"
)

// Sentinel errors.
var (
	// ErrNotFound is returned when the registry has no such package.
	ErrNotFound = errors.New("release: package not found")
	// ErrUnsupported is returned for an ecosystem without a fetcher.
	ErrUnsupported = errors.New("release: no registry fetcher for this ecosystem")
	// ErrMalformed is wrapped by every parse error.
	ErrMalformed = errors.New("release: malformed registry response")
)

// Version is one published version of a package.
type Version struct {
	Version string `json:"version"`
	// Published is when it was published; zero if the registry does not
	// say.
	Published time.Time `json:"published,omitzero"`
	// Yanked is true when the registry withdrew it (PyPI yanked, cargo
	// yanked). Clients skip yanked versions when resolving a range.
	Yanked bool `json:"yanked,omitempty"`
	// InstallScripts is true when installing it runs its code: npm
	// preinstall/install/postinstall scripts or a node-gyp build, or a
	// Python release with no wheel (pip builds the sdist).
	InstallScripts bool `json:"install_scripts,omitempty"`
	// Artifact is the URL that a client would download, if known.
	Artifact string `json:"artifact,omitempty"`
}

// Info is what a registry says about a package.
type Info struct {
	Name     string    `json:"name"`
	Versions []Version `json:"versions"`
	// Tags are npm's dist-tags ("latest" → "4.17.21").
	Tags map[string]string `json:"tags,omitempty"`
}

// Lookup returns the version v, if published.
func (in *Info) Lookup(v string) (Version, bool) {
	for _, x := range in.Versions {
		if x.Version == v {
			return x, true
		}
	}
	return Version{}, false
}

// Resolve picks the version that ecosystem's client would install for spec,
// with resolver.Pick: npm follows npm-pick-manifest (a dist-tag named by
// the spec, else the "latest" tag when it satisfies the range, else the
// highest match); oci takes the tag itself; the others take resolver.Best.
// Yanked versions are skipped. An empty spec means any version: "*" for
// npm, "latest" for oci and the highest version elsewhere. When nothing
// matches the error wraps resolver.ErrNoMatch.
func (in *Info) Resolve(ecosystem, spec string) (Version, error) {
	var cands []string
	for _, v := range in.Versions {
		if !v.Yanked {
			cands = append(cands, v.Version)
		}
	}
	best, err := resolver.Pick(ecosystem, spec, cands, in.Tags)
	switch {
	case err != nil && spec == "":
		return Version{}, fmt.Errorf("resolving %s: %w", in.Name, err)
	case err != nil:
		return Version{}, fmt.Errorf("resolving %s@%s among %d versions: %w", in.Name, spec, len(cands), err)
	}
	v, _ := in.Lookup(best)
	return v, nil
}
