package listing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Packument is an npm registry's full package document, as ParsePackument
// reads it. The mirror serves it filtered and rewritten (Top and each
// Manifest's Raw are the registry's own bytes); release reads its versions,
// dist-tags and publish times.
type Packument struct {
	// Name is the package's name, which the document names.
	Name string
	// Top are the document's top-level fields, as the registry wrote them.
	Top map[string]json.RawMessage
	// Versions are the version manifests, by the document's own keys.
	Versions map[string]*Manifest
	// Tags are the dist-tags ("latest" → "1.3.0").
	Tags map[string]string
	// TimeErr says why the publish time of a version is unknown although
	// the document's time map gives one: the map is not an object, or the
	// entry of a version is not an RFC 3339 string. It is nil when every
	// time given was read. The times of the other versions are read even
	// so.
	TimeErr error
}

// Manifest is what is read of one version's manifest.
type Manifest struct {
	// Raw is the manifest as the registry wrote it.
	Raw json.RawMessage
	// Tarball, Integrity (an SRI string) and Shasum (sha1 hex) are its
	// dist fields, as given.
	Tarball, Integrity, Shasum string
	// Signatures are its registry signatures (dist.signatures).
	Signatures []Signature
	// Attested: dist.attestations names provenance attestations.
	Attested bool
	// Scripts are the scripts npm runs when it installs the version: its
	// preinstall, install and postinstall scripts, and "binding.gyp" for a
	// node-gyp build (gypfile), in that order.
	Scripts []string
	// HasInstallScript is the registry's own hasInstallScript.
	HasInstallScript bool
	// Bundles are the names of the packages its tarball carries, as
	// bundleDependencies (or bundledDependencies) declares them: a list of
	// names, or true for all of its dependencies. Sorted, each once; a name
	// that is no npm package name (CheckNpmName) is left out.
	Bundles []string
	// Published is when the version was published (the document's
	// time[version]); zero when the document does not say, or the time
	// does not parse (then TimeErr says why).
	Published time.Time
}

// Signature is one registry signature of a version: ECDSA P-256, base64,
// over "name@version:integrity", by the registry key KeyID.
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// manifestJSON is the part of a version's manifest that is read.
type manifestJSON struct {
	Dist struct {
		Tarball      string          `json:"tarball"`
		Integrity    string          `json:"integrity"`
		Shasum       string          `json:"shasum"`
		Signatures   []Signature     `json:"signatures"`
		Attestations json.RawMessage `json:"attestations"`
	} `json:"dist"`
	Scripts          map[string]json.RawMessage `json:"scripts"`
	GypFile          bool                       `json:"gypfile"`
	HasInstallScript bool                       `json:"hasInstallScript"`
	// Dependencies, BundleDependencies and BundledDependencies (npm
	// reads either spelling) are read by bundled; a value of another
	// shape than npm's bundles nothing, and fails no version.
	Dependencies        json.RawMessage `json:"dependencies"`
	BundleDependencies  json.RawMessage `json:"bundleDependencies"`
	BundledDependencies json.RawMessage `json:"bundledDependencies"`
}

// installScripts are the lifecycle scripts npm runs at install time.
var installScripts = []string{"preinstall", "install", "postinstall"}

// ParsePackument reads the full packument of package name. It returns an
// error when the document is not a JSON object, names another package, has
// no versions object, or has dist-tags or a version manifest of another
// shape than npm's. A time that does not parse is not an error: the
// version's publish time is unknown, and TimeErr says why.
func ParsePackument(name string, b []byte) (*Packument, error) {
	p := &Packument{Name: name, Versions: map[string]*Manifest{}, Tags: map[string]string{}}
	if err := json.Unmarshal(b, &p.Top); err != nil {
		return nil, fmt.Errorf("npm packument of %.120s: %w", name, err)
	}
	var got string
	if err := json.Unmarshal(p.Top["name"], &got); err != nil || got != name {
		return nil, fmt.Errorf("npm packument of %.120s names %.120q", name, got)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(p.Top["versions"], &raw); err != nil {
		return nil, fmt.Errorf("npm packument of %.120s: versions: %w", name, err)
	}
	if t := p.Top["dist-tags"]; t != nil {
		if err := json.Unmarshal(t, &p.Tags); err != nil {
			return nil, fmt.Errorf("npm packument of %.120s: dist-tags: %w", name, err)
		}
	}
	var times map[string]json.RawMessage
	if t := p.Top["time"]; t != nil {
		if err := json.Unmarshal(t, &times); err != nil {
			p.TimeErr = fmt.Errorf("npm packument of %.120s: time is not an object", name)
		}
	}
	for _, v := range slices.Sorted(maps.Keys(raw)) {
		var m manifestJSON
		if err := json.Unmarshal(raw[v], &m); err != nil {
			return nil, fmt.Errorf("npm packument of %.120s: version %.120s: %w", name, v, err)
		}
		mf := newManifest(&m, raw[v])
		if when, ok := times[v]; ok {
			var err error
			if mf.Published, err = publishTime(when); err != nil && p.TimeErr == nil {
				p.TimeErr = fmt.Errorf("npm packument of %.120s: time[%.120q]: %w", name, v, err)
			}
		}
		p.Versions[v] = mf
	}
	return p, nil
}

// publishTime reads one entry of a packument's time map.
func publishTime(raw json.RawMessage) (time.Time, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return time.Time{}, errors.New("not a string")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t, nil
}

func newManifest(m *manifestJSON, raw json.RawMessage) *Manifest {
	mf := &Manifest{Raw: raw, Tarball: m.Dist.Tarball, Integrity: m.Dist.Integrity, Shasum: m.Dist.Shasum,
		Signatures: m.Dist.Signatures, HasInstallScript: m.HasInstallScript,
		Attested: len(m.Dist.Attestations) > 0 && !bytes.Equal(m.Dist.Attestations, []byte("null"))}
	for _, s := range installScripts {
		if _, ok := m.Scripts[s]; ok {
			mf.Scripts = append(mf.Scripts, s)
		}
	}
	if m.GypFile {
		mf.Scripts = append(mf.Scripts, "binding.gyp")
	}
	mf.Bundles = m.bundled()
	return mf
}

// bundled are the names of the packages a version's manifest says its
// tarball carries (Manifest.Bundles).
func (m *manifestJSON) bundled() []string {
	var names []string
	for _, raw := range []json.RawMessage{m.BundleDependencies, m.BundledDependencies} {
		var all bool
		if json.Unmarshal(raw, &all) == nil && all {
			var deps map[string]json.RawMessage
			_ = json.Unmarshal(m.Dependencies, &deps) // dependencies of another shape: none
			for d := range deps {
				names = append(names, d)
			}
			continue
		}
		var list []json.RawMessage
		_ = json.Unmarshal(raw, &list) // bundles of another shape: none
		for _, item := range list {
			var n string
			if json.Unmarshal(item, &n) == nil {
				names = append(names, n)
			}
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool { return CheckNpmName(n) != nil })
	slices.Sort(names)
	return slices.Compact(names)
}

// CheckNpmName accepts npm package names as the registry does: at most 214
// characters, lower case, URL-safe, an optional @scope/ first, and no path
// tricks.
func CheckNpmName(name string) error {
	if name == "" || len(name) > 214 {
		return fmt.Errorf("npm package name %.120q: empty or longer than 214 characters", name)
	}
	if strings.HasPrefix(name, "@") {
		scope, pkg, ok := strings.Cut(name[1:], "/")
		if !ok || !validNpmPart(scope) || !validNpmPart(pkg) {
			return fmt.Errorf("npm package name %.120q: bad scoped name", name)
		}
		return nil
	}
	if !validNpmPart(name) {
		return fmt.Errorf("npm package name %.120q: not a valid name", name)
	}
	return nil
}

// validNpmPart is one segment of an npm name.
func validNpmPart(s string) bool {
	if s == "" || s[0] == '.' || s[0] == '_' {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}
