package pypi

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

// Errors of parsing upstream pages and names.
var (
	ErrBadName     = errors.New("pypi: not a valid project name")
	ErrBadFilename = errors.New("pypi: not a valid file name")
	ErrAPIVersion  = errors.New("pypi: unsupported simple API version")
	ErrOtherName   = errors.New("pypi: the page names another project")
)

// project is a parsed project page.
type project struct {
	name     string  // normal form
	files    []*file // usable files, in the upstream's order
	byName   map[string]*file
	versions []string // the upstream's versions (PEP 700), if given
}

// file is one file of a project page.
type file struct {
	name           string
	url            string // absolute upstream URL, without a fragment
	sha256         string // lower-case hex; "": none given
	size           int64  // 0: not given
	uploaded       time.Time
	yanked         bool
	yankedReason   string
	requiresPython string
	metaSHA256     string // of the core metadata file; "": none to serve
	version        string
	sdist          bool
}

// jsonPage is the part of a PEP 691 project page the mirror reads.
type jsonPage struct {
	Meta struct {
		APIVersion string `json:"api-version"`
	} `json:"meta"`
	Name     string     `json:"name"`
	Files    []jsonFile `json:"files"`
	Versions []string   `json:"versions"`
}

type jsonFile struct {
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

// parseProject reads the PEP 691 JSON page of project name (in normal
// form), fetched from pageURL. Files whose name, URL or version cannot be
// read, or that belong to another project, are left out: the mirror
// serves only what it can attribute and decide on.
func parseProject(eco *resolver.Ecosystem, name string, pageURL *url.URL, b []byte) (*project, error) {
	var pg jsonPage
	if err := json.Unmarshal(b, &pg); err != nil {
		return nil, fmt.Errorf("reading the page of %s: %w", name, err)
	}
	if err := checkAPIVersion(pg.Meta.APIVersion); err != nil {
		return nil, err
	}
	if eco.NormalizeName(pg.Name) != name {
		return nil, fmt.Errorf("%w: %.120q, not %s", ErrOtherName, pg.Name, name)
	}
	p := &project{name: name, byName: map[string]*file{}, versions: pg.Versions}
	for i := range pg.Files {
		f, err := newFile(eco, name, pageURL, &pg.Files[i])
		if err != nil || p.byName[f.name] != nil {
			continue
		}
		p.files = append(p.files, f)
		p.byName[f.name] = f
	}
	return p, nil
}

// checkAPIVersion accepts the major version 1 of the simple API (PEP 691:
// a client must refuse a major version it does not know).
func checkAPIVersion(v string) error {
	major, _, _ := strings.Cut(v, ".")
	if major != "1" {
		return fmt.Errorf("%w %.20q", ErrAPIVersion, v)
	}
	return nil
}

// newFile reads one file entry of project name's page.
func newFile(eco *resolver.Ecosystem, name string, pageURL *url.URL, j *jsonFile) (*file, error) {
	if err := checkFilename(j.Filename); err != nil {
		return nil, err
	}
	version, sdist, err := fileVersion(eco, name, j.Filename)
	if err != nil {
		return nil, err
	}
	u, err := fileURL(pageURL, j.URL)
	if err != nil {
		return nil, err
	}
	f := &file{name: j.Filename, url: u, sha256: hexDigest(j.Hashes["sha256"]), size: max(j.Size, 0),
		requiresPython: j.RequiresPython, version: version, sdist: sdist}
	f.uploaded, _ = time.Parse(time.RFC3339Nano, j.UploadTime) // unknown when it does not parse
	f.yanked, f.yankedReason = yanked(j.Yanked)
	for _, m := range []json.RawMessage{j.CoreMetadata, j.DistInfoMetadata, j.DataDistInfoMetadata} {
		if f.metaSHA256 = metadataDigest(m); f.metaSHA256 != "" {
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

// hexDigest is s as a lower-case sha256 hex digest, or "" when it is not
// one.
func hexDigest(s string) string {
	s = strings.ToLower(s)
	if b, err := hex.DecodeString(s); err != nil || len(b) != 32 {
		return ""
	}
	return s
}

// yanked reads PEP 691's yanked: false, true, or a reason (which means
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
	return hexDigest(m["sha256"])
}
