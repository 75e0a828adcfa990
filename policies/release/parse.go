package release

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/resolver/listing"
)

// MaxVersions caps the versions accepted from one document.
const MaxVersions = 100_000

// malformed wraps a parse error in ErrMalformed.
func malformed(err error) error { return fmt.Errorf("%w: %w", ErrMalformed, err) }

// ParseNpm reads the npm packument of package name (listing.ParsePackument)
// as an Info: the full document, whose "time" map has the publish times
// (the abbreviated one has none). A version has install scripts when npm
// would run one (listing.Manifest.Scripts) or the registry says it has
// (hasInstallScript). Unlike the mirror, which serves the versions whose
// time it can read, it refuses a packument with a time that does not parse.
func ParseNpm(name string, data []byte) (*Info, error) {
	p, err := listing.ParsePackument(name, data)
	if err != nil {
		return nil, malformed(err)
	}
	if p.TimeErr != nil {
		return nil, malformed(p.TimeErr)
	}
	if len(p.Versions) > MaxVersions {
		return nil, fmt.Errorf("%w: npm packument: %d versions", ErrMalformed, len(p.Versions))
	}
	in := &Info{Name: p.Name, Tags: p.Tags}
	for v, m := range p.Versions {
		if v == "" {
			return nil, fmt.Errorf("%w: npm packument: empty version key", ErrMalformed)
		}
		in.Versions = append(in.Versions, Version{Version: v, Published: m.Published, Artifact: m.Tarball,
			InstallScripts: len(m.Scripts) > 0 || m.HasInstallScript})
	}
	sortVersions(in)
	return in, nil
}

// ParsePyPI reads the page of PyPI project name (in PEP 503 normal form)
// of PyPI's JSON simple API (listing.ParseProject: PEP 691, with PEP 700's
// versions and upload-time) as an Info. base is the page's URL, against
// which relative file URLs are resolved. A version's publish time is its
// earliest file's upload time; it is yanked when every file is; it has
// install scripts when it has no wheel; its artifact is its first wheel,
// else its first sdist. Files the page cannot attribute to a version of the
// project (eggs, exes, another project's) are left out, as the mirror
// leaves them out; a page with an upload time that does not parse is
// refused.
func ParsePyPI(name string, data []byte, base *url.URL) (*Info, error) {
	p, err := listing.ParseProject(name, base, data)
	if err != nil {
		return nil, malformed(err)
	}
	if p.TimeErr != nil {
		return nil, malformed(p.TimeErr)
	}
	if len(p.Files) > MaxVersions*10 || len(p.Versions) > MaxVersions {
		return nil, fmt.Errorf("%w: pypi project: too many files or versions", ErrMalformed)
	}
	byV := map[string]*pypiVersion{}
	get := func(v string) *pypiVersion {
		a, ok := byV[v]
		if !ok {
			a = &pypiVersion{v: Version{Version: v}}
			byV[v] = a
		}
		return a
	}
	for _, v := range p.Versions {
		if v == "" {
			return nil, fmt.Errorf("%w: pypi project: empty version", ErrMalformed)
		}
		get(v)
	}
	for _, f := range p.Files {
		get(f.Version).add(f)
	}
	in := &Info{Name: p.Name}
	for _, a := range byV {
		in.Versions = append(in.Versions, a.version())
	}
	sortVersions(in)
	return in, nil
}

// pypiVersion gathers the files of one version of a project page.
type pypiVersion struct {
	v             Version
	files, yanked int
	wheel, sdist  string // the first of each
}

func (a *pypiVersion) add(f *listing.ProjectFile) {
	a.files++
	if f.Yanked {
		a.yanked++
	}
	switch {
	case !f.Sdist && a.wheel == "":
		a.wheel = f.URL
	case f.Sdist && a.sdist == "":
		a.sdist = f.URL
	}
	if !f.Uploaded.IsZero() && (a.v.Published.IsZero() || f.Uploaded.Before(a.v.Published)) {
		a.v.Published = f.Uploaded
	}
}

func (a *pypiVersion) version() Version {
	v := a.v
	v.Yanked = a.files > 0 && a.yanked == a.files
	v.InstallScripts = a.files > 0 && a.wheel == ""
	v.Artifact = a.wheel
	if v.Artifact == "" {
		v.Artifact = a.sdist
	}
	return v
}

// ParseCrates reads the sparse-index file of crate name
// (listing.ParseCrateIndex: one JSON object a line, with name, vers,
// cksum, yanked and, on newer lines, pubtime) as an Info. dl is the
// index's config.json download template (empty to leave Artifact unset).
// Unlike the mirror, which serves the lines it can read, it refuses a file
// with a line that does not parse.
func ParseCrates(name string, data []byte, dl string) (*Info, error) {
	idx := listing.ParseCrateIndex(strings.ToLower(name), data)
	if idx.Err != nil {
		return nil, malformed(idx.Err)
	}
	if len(idx.Lines) == 0 {
		return nil, fmt.Errorf("%w: the index file of %s has no versions", ErrMalformed, idx.Name)
	}
	if len(idx.Lines) > MaxVersions {
		return nil, fmt.Errorf("%w: the index file of %s has more than %d versions", ErrMalformed, idx.Name, MaxVersions)
	}
	in := &Info{Name: idx.Lines[0].Name}
	for _, l := range idx.Lines {
		v := Version{Version: l.Vers, Yanked: l.Yanked, Published: l.Published}
		if dl != "" {
			v.Artifact = listing.CrateDownloadURL(dl, l.Name, l.Vers, l.Cksum)
		}
		in.Versions = append(in.Versions, v)
	}
	return in, nil
}

// sortVersions orders in's versions by their text, so that a listing
// reads the same each time.
func sortVersions(in *Info) {
	slices.SortFunc(in.Versions, func(a, b Version) int { return strings.Compare(a.Version, b.Version) })
}
