package release

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// MaxVersions caps the versions accepted from one document.
const MaxVersions = 100_000

type npmPackument struct {
	Name     string                     `json:"name"`
	DistTags map[string]string          `json:"dist-tags"`
	Versions map[string]npmVersion      `json:"versions"`
	Time     map[string]json.RawMessage `json:"time"`
}

type npmVersion struct {
	Scripts          map[string]json.RawMessage `json:"scripts"`
	HasInstallScript bool                       `json:"hasInstallScript"`
	Gypfile          bool                       `json:"gypfile"`
	Dist             struct {
		Tarball string `json:"tarball"`
	} `json:"dist"`
}

// ParseNpm parses an npm packument (the full document, whose "time" map has
// the publish times; the abbreviated one has none).
func ParseNpm(data []byte) (*Info, error) {
	var p npmPackument
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%w: npm packument: %v", ErrMalformed, err)
	}
	if p.Name == "" {
		return nil, fmt.Errorf("%w: npm packument: no name", ErrMalformed)
	}
	if len(p.Versions) > MaxVersions {
		return nil, fmt.Errorf("%w: npm packument: %d versions", ErrMalformed, len(p.Versions))
	}
	in := &Info{Name: p.Name, Tags: p.DistTags}
	for v, meta := range p.Versions {
		if v == "" {
			return nil, fmt.Errorf("%w: npm packument: empty version key", ErrMalformed)
		}
		x := Version{Version: v, Artifact: meta.Dist.Tarball}
		for _, s := range []string{"preinstall", "install", "postinstall"} {
			if _, ok := meta.Scripts[s]; ok {
				x.InstallScripts = true
			}
		}
		x.InstallScripts = x.InstallScripts || meta.HasInstallScript || meta.Gypfile
		if raw, ok := p.Time[v]; ok {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, fmt.Errorf("%w: npm packument: time[%q] is not a string", ErrMalformed, v)
			}
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return nil, fmt.Errorf("%w: npm packument: time[%q]: %v", ErrMalformed, v, err)
			}
			x.Published = t
		}
		in.Versions = append(in.Versions, x)
	}
	slices.SortFunc(in.Versions, func(a, b Version) int { return strings.Compare(a.Version, b.Version) })
	return in, nil
}

type pypiProject struct {
	Name     string     `json:"name"`
	Files    []pypiFile `json:"files"`
	Versions []string   `json:"versions"`
}

type pypiFile struct {
	Filename   string          `json:"filename"`
	URL        string          `json:"url"`
	UploadTime string          `json:"upload-time"`
	Yanked     json.RawMessage `json:"yanked"`
}

// ParsePyPI parses a project page of PyPI's JSON simple API (PEP 691, with
// PEP 700's versions and upload-time). base is the page's URL, against which
// relative file URLs are resolved; it may be nil. A version's publish time
// is its earliest file's upload time; it is yanked when every file is; it
// has install scripts when it has no wheel.
func ParsePyPI(data []byte, base *url.URL) (*Info, error) {
	var p pypiProject
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%w: pypi project: %v", ErrMalformed, err)
	}
	if p.Name == "" {
		return nil, fmt.Errorf("%w: pypi project: no name", ErrMalformed)
	}
	if len(p.Files) > MaxVersions*10 || len(p.Versions) > MaxVersions {
		return nil, fmt.Errorf("%w: pypi project: too many files or versions", ErrMalformed)
	}
	type acc struct {
		v                Version
		files, yanked    int
		wheel, sdist     string
		hasWheel, hasAny bool
	}
	byV := map[string]*acc{}
	get := func(v string) *acc {
		a, ok := byV[v]
		if !ok {
			a = &acc{v: Version{Version: v}}
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
		v, kind := pypiFileVersion(f.Filename)
		if v == "" {
			continue // eggs, exes and names that do not parse
		}
		a := get(v)
		a.files++
		if yanked(f.Yanked) {
			a.yanked++
		}
		u := f.URL
		if base != nil && u != "" {
			if ref, err := url.Parse(u); err == nil {
				u = base.ResolveReference(ref).String()
			}
		}
		if kind == "wheel" {
			a.hasWheel = true
			if a.wheel == "" {
				a.wheel = u
			}
		} else if a.sdist == "" {
			a.sdist = u
		}
		if f.UploadTime != "" {
			t, err := time.Parse(time.RFC3339Nano, f.UploadTime)
			if err != nil {
				return nil, fmt.Errorf("%w: pypi file %q: upload-time: %v", ErrMalformed, f.Filename, err)
			}
			if a.v.Published.IsZero() || t.Before(a.v.Published) {
				a.v.Published = t
			}
		}
	}
	in := &Info{Name: p.Name}
	for _, a := range byV {
		a.v.Yanked = a.files > 0 && a.yanked == a.files
		a.v.InstallScripts = a.files > 0 && !a.hasWheel
		a.v.Artifact = a.wheel
		if a.v.Artifact == "" {
			a.v.Artifact = a.sdist
		}
		in.Versions = append(in.Versions, a.v)
	}
	slices.SortFunc(in.Versions, func(a, b Version) int { return strings.Compare(a.Version, b.Version) })
	return in, nil
}

// yanked reads PEP 592's yanked: false, true, or a reason string.
func yanked(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "false" && s != "null"
}

// pypiFileVersion extracts the version from a wheel or sdist file name.
func pypiFileVersion(name string) (version, kind string) {
	if strings.ContainsAny(name, "/\\") {
		return "", ""
	}
	if stem, ok := strings.CutSuffix(name, ".whl"); ok {
		parts := strings.Split(stem, "-")
		if len(parts) < 5 || len(parts) > 6 || parts[1] == "" {
			return "", ""
		}
		return parts[1], "wheel"
	}
	for _, ext := range []string{".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar.xz"} {
		if stem, ok := strings.CutSuffix(name, ext); ok {
			i := strings.LastIndexByte(stem, '-')
			if i <= 0 || i == len(stem)-1 {
				return "", ""
			}
			return stem[i+1:], "sdist"
		}
	}
	return "", ""
}

type crateLine struct {
	Name    string `json:"name"`
	Vers    string `json:"vers"`
	Yanked  bool   `json:"yanked"`
	Pubtime string `json:"pubtime"`
	Cksum   string `json:"cksum"`
}

// ParseCrates parses a crates sparse-index file: one JSON object per line
// with name, vers, yanked and (newer entries) pubtime. dl is the index's
// config.json download template (empty to leave Artifact unset).
func ParseCrates(data []byte, dl string) (*Info, error) {
	in := &Info{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var c crateLine
		if err := json.Unmarshal(line, &c); err != nil {
			return nil, fmt.Errorf("%w: crates index line %d: %v", ErrMalformed, n, err)
		}
		if c.Name == "" || c.Vers == "" {
			return nil, fmt.Errorf("%w: crates index line %d: no name or vers", ErrMalformed, n)
		}
		if in.Name == "" {
			in.Name = c.Name
		} else if !strings.EqualFold(in.Name, c.Name) {
			return nil, fmt.Errorf("%w: crates index line %d: name %q, want %q", ErrMalformed, n, c.Name, in.Name)
		}
		v := Version{Version: c.Vers, Yanked: c.Yanked, Artifact: crateURL(dl, c.Name, c.Vers, c.Cksum)}
		if c.Pubtime != "" {
			t, err := time.Parse(time.RFC3339Nano, c.Pubtime)
			if err != nil {
				return nil, fmt.Errorf("%w: crates index line %d: pubtime: %v", ErrMalformed, n, err)
			}
			v.Published = t
		}
		if len(in.Versions) >= MaxVersions {
			return nil, fmt.Errorf("%w: crates index: more than %d versions", ErrMalformed, MaxVersions)
		}
		in.Versions = append(in.Versions, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: crates index: %v", ErrMalformed, err)
	}
	if in.Name == "" {
		return nil, fmt.Errorf("%w: crates index: no versions", ErrMalformed)
	}
	return in, nil
}

var dlMarker = regexp.MustCompile(`\{(crate|version|prefix|lowerprefix|sha256-checksum)\}`)

// crateURL fills in a crates index download template, as cargo does: with
// no marker, "/{crate}/{version}/download" is appended.
func crateURL(dl, name, vers, cksum string) string {
	if dl == "" {
		return ""
	}
	if !dlMarker.MatchString(dl) {
		return strings.TrimSuffix(dl, "/") + "/" + name + "/" + vers + "/download"
	}
	return dlMarker.ReplaceAllStringFunc(dl, func(m string) string {
		switch m {
		case "{crate}":
			return name
		case "{version}":
			return vers
		case "{prefix}":
			return cratePrefix(name)
		case "{lowerprefix}":
			return strings.ToLower(cratePrefix(name))
		}
		return cksum
	})
}

// cratePrefix is the index directory of a crate name: 1, 2, 3/a, or ab/cd.
func cratePrefix(name string) string {
	switch len(name) {
	case 0:
		return ""
	case 1:
		return "1"
	case 2:
		return "2"
	case 3:
		return "3/" + name[:1]
	}
	return name[:2] + "/" + name[2:4]
}
