package listing

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/resolver"
)

// Errors of reading PyPI's simple API.
var (
	// ErrBadFilename: a distribution file name that is no plain file
	// name, or whose version cannot be read.
	ErrBadFilename = errors.New("listing: not a valid distribution file name")
	// ErrAPIVersion: a page of a major version of the simple API other
	// than 1, which PEP 691 says a client must refuse.
	ErrAPIVersion = errors.New("listing: unsupported simple API version")
	// ErrOtherName: a project page that names another project.
	ErrOtherName = errors.New("listing: the page names another project")
)

// pypi is the resolver's PyPI: PEP 503 names and PEP 440 versions.
var pypi, _ = resolver.Lookup(resolver.PyPI)

// Project is a project page of the JSON simple API, as ParseProject reads
// it: the files it can attribute to the project and one of its versions.
// The mirror serves them (filtered, rewritten onto itself) and verifies
// each against its sha256; release reads versions, yanked status and
// upload times from them.
type Project struct {
	// Name is the project's name in PEP 503 normal form.
	Name string
	// Files are the usable files, in the page's order, each name once.
	Files []*ProjectFile
	// ByName finds a file of Files by its file name.
	ByName map[string]*ProjectFile
	// Versions are the page's own versions (PEP 700), if it gives them.
	Versions []string
	// TimeErr says why the upload time of a file is unknown although
	// the page gives one: it is not RFC 3339. It is nil when every time
	// given was read.
	TimeErr error
}

// ProjectFile is one distribution file of a project page.
type ProjectFile struct {
	// Name is the file name, a plain one (CheckFilename).
	Name string
	// URL is where the file is: an absolute http(s) URL, without a
	// fragment.
	URL string
	// SHA256 is its digest in lower-case hex; "" when the page gives
	// none.
	SHA256 string
	// Size is its size; 0 when the page does not say.
	Size int64
	// Uploaded is its PEP 700 upload-time; zero when unknown.
	Uploaded time.Time
	// Yanked (PEP 592), with the reason when the page gives one.
	Yanked       bool
	YankedReason string
	// RequiresPython is its requires-python, as given.
	RequiresPython string
	// MetaSHA256 is the sha256 of its core metadata file (PEP 658/714);
	// "": none with a digest.
	MetaSHA256 string
	// Version is the version its name gives (FileVersion).
	Version string
	// Sdist: it is a source distribution (which pip builds, running the
	// package's code), not a wheel.
	Sdist bool
}

// projectJSON is the part of a PEP 691 project page that is read.
type projectJSON struct {
	Meta struct {
		APIVersion string `json:"api-version"`
	} `json:"meta"`
	Name     string     `json:"name"`
	Files    []fileJSON `json:"files"`
	Versions []string   `json:"versions"`
}

type fileJSON struct {
	Filename       string            `json:"filename"`
	URL            string            `json:"url"`
	Hashes         map[string]string `json:"hashes"`
	RequiresPython string            `json:"requires-python"`
	Yanked         json.RawMessage   `json:"yanked"`
	Size           int64             `json:"size"`
	UploadTime     string            `json:"upload-time"`
	CoreMetadata   json.RawMessage   `json:"core-metadata"`
	// The names PEP 658 and PyPI's first release of it gave the key.
	DistInfoMetadata     json.RawMessage `json:"dist-info-metadata"`
	DataDistInfoMetadata json.RawMessage `json:"data-dist-info-metadata"`
}

// ParseProject reads the PEP 691 JSON page of project name (in PEP 503
// normal form), fetched from pageURL, against which its file URLs are
// resolved. It returns an error when the page is not JSON of the page's
// shape, is of another major API version (ErrAPIVersion) or names another
// project (ErrOtherName). Files whose name, URL or version cannot be read,
// that belong to another project, or whose name came earlier, are left out:
// what is left can be attributed to one version of the project.
func ParseProject(name string, pageURL *url.URL, b []byte) (*Project, error) {
	if pageURL == nil {
		return nil, fmt.Errorf("reading the page of %.120s: no page URL to resolve its files against", name)
	}
	var pg projectJSON
	if err := json.Unmarshal(b, &pg); err != nil {
		return nil, fmt.Errorf("reading the page of %.120s: %w", name, err)
	}
	if err := CheckAPIVersion(pg.Meta.APIVersion); err != nil {
		return nil, err
	}
	if pypi.NormalizeName(pg.Name) != name {
		return nil, fmt.Errorf("%w: %.120q, not %.120s", ErrOtherName, pg.Name, name)
	}
	p := &Project{Name: name, ByName: map[string]*ProjectFile{}, Versions: pg.Versions}
	for i := range pg.Files {
		f, err := newProjectFile(name, pageURL, &pg.Files[i])
		if err != nil || p.ByName[f.Name] != nil {
			continue
		}
		if t := pg.Files[i].UploadTime; t != "" {
			var err error
			if f.Uploaded, err = time.Parse(time.RFC3339Nano, t); err != nil && p.TimeErr == nil {
				p.TimeErr = fmt.Errorf("the page of %.120s: file %.120q: upload-time: %w", name, f.Name, err)
			}
		}
		p.Files = append(p.Files, f)
		p.ByName[f.Name] = f
	}
	return p, nil
}

// CheckAPIVersion accepts the major version 1 of the simple API (PEP 691:
// a client must refuse a major version it does not know). It returns an
// error wrapping ErrAPIVersion.
func CheckAPIVersion(v string) error {
	major, _, _ := strings.Cut(v, ".")
	if major != "1" {
		return fmt.Errorf("%w %.20q", ErrAPIVersion, v)
	}
	return nil
}

// newProjectFile reads one file entry of project name's page, but for its
// upload time.
func newProjectFile(name string, pageURL *url.URL, j *fileJSON) (*ProjectFile, error) {
	if err := CheckFilename(j.Filename); err != nil {
		return nil, err
	}
	version, sdist, err := FileVersion(name, j.Filename)
	if err != nil {
		return nil, err
	}
	u, err := fileURL(pageURL, j.URL)
	if err != nil {
		return nil, err
	}
	f := &ProjectFile{Name: j.Filename, URL: u, SHA256: hexSHA256(j.Hashes["sha256"]), Size: max(j.Size, 0),
		RequiresPython: j.RequiresPython, Version: version, Sdist: sdist}
	f.Yanked, f.YankedReason = yanked(j.Yanked)
	for _, m := range []json.RawMessage{j.CoreMetadata, j.DistInfoMetadata, j.DataDistInfoMetadata} {
		if f.MetaSHA256 = metadataDigest(m); f.MetaSHA256 != "" {
			break
		}
	}
	return f, nil
}

// fileURL resolves a file's URL against its page's: an http(s) URL with
// a host, without its fragment.
func fileURL(pageURL *url.URL, raw string) (string, error) {
	ref, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("reading a file URL: %w", err)
	}
	u := pageURL.ResolveReference(ref)
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("file URL %.120q is not an http(s) URL", raw)
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String(), nil
}

// hexSHA256 is s as a lower-case sha256 hex digest, or "" when it is not
// one.
func hexSHA256(s string) string {
	s = strings.ToLower(s)
	if b, err := hex.DecodeString(s); err != nil || len(b) != 32 {
		return ""
	}
	return s
}

// yanked reads PEP 592's yanked: false, true, or a reason (which means
// true). Anything else is taken as yanked, without a reason.
func yanked(raw json.RawMessage) (bool, string) {
	var b bool
	if len(raw) == 0 || string(raw) == "null" || (json.Unmarshal(raw, &b) == nil && !b) {
		return false, ""
	}
	var reason string
	_ = json.Unmarshal(raw, &reason)
	return true, reason
}

// metadataDigest reads core-metadata: the sha256 of a {"sha256": ...}
// map. true without a digest gives "", since a metadata file that cannot
// be verified is not served.
func metadataDigest(raw json.RawMessage) string {
	var m map[string]string
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return ""
	}
	return hexSHA256(m["sha256"])
}

// sdistExts are the archive extensions of source distributions that pip
// installs, longest first where one ends another.
var sdistExts = []string{".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".zip", ".tar"}

// CheckFilename accepts a plain file name: no path, no leading dot, no
// control characters, at most 255 bytes. It returns an error wrapping
// ErrBadFilename.
func CheckFilename(name string) error {
	if name == "" || len(name) > 255 || name[0] == '.' || strings.ContainsAny(name, "/\\") ||
		strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return fmt.Errorf("%w: %.120q", ErrBadFilename, name)
	}
	return nil
}

// FileVersion reads the version from the name of a distribution file of
// project name (in normal form): a wheel's second field
// ({name}-{version}(-{build})?-{python}-{abi}-{platform}.whl), or what
// follows the name in an sdist ({name}-{version}.tar.gz). The version
// must be PEP 440's, and the file's name the project's. Its errors wrap
// ErrBadFilename.
func FileVersion(name, filename string) (version string, sdist bool, err error) {
	if stem, ok := strings.CutSuffix(filename, ".whl"); ok {
		parts := strings.Split(stem, "-")
		if (len(parts) != 5 && len(parts) != 6) || pypi.NormalizeName(parts[0]) != name {
			return "", false, fmt.Errorf("%w: %.120q is not a wheel of %.120s", ErrBadFilename, filename, name)
		}
		version = parts[1]
	} else {
		version, err = sdistVersion(name, filename)
		if err != nil {
			return "", false, err
		}
		sdist = true
	}
	if _, err := pypi.ParseVersion(version); err != nil {
		return "", false, fmt.Errorf("%w: %.120q: %w", ErrBadFilename, filename, err)
	}
	return version, sdist, nil
}

// sdistVersion reads the version of an sdist's name: the project's name
// may hold dashes (python-dateutil-2.8.2.tar.gz), so the version is what
// follows the dash after which the name, normalised, is the project's.
func sdistVersion(name, filename string) (string, error) {
	for _, ext := range sdistExts {
		stem, ok := strings.CutSuffix(filename, ext)
		if !ok {
			continue
		}
		for i := range len(stem) {
			if stem[i] == '-' && pypi.NormalizeName(stem[:i]) == name && i+1 < len(stem) {
				return stem[i+1:], nil
			}
		}
		break
	}
	return "", fmt.Errorf("%w: %.120q is not a distribution of %.120s", ErrBadFilename, filename, name)
}
