// Package prefetch warms a running mirror from lockfiles: npm's
// package-lock.json (or npm-shrinkwrap.json), pip's requirements files
// (name==version pins, with --hash options) and Cargo.lock. Each artifact
// is fetched through the mirror over HTTP, as any client's would be, so it
// is verified against its registry's digests, cached and recorded by the
// mirror; prefetch also checks it against the hash the lockfile pins, and
// reports an artifact whose lockfile hash differs from what the registry
// serves.
//
// Trust model: the lockfiles are untrusted input (an agent may have
// written them); their parsers bound what they read and never make the
// mirror fetch anything but its own paths.
package prefetch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/crates"
	"github.com/sandtrail/sandtrail/registry-mirror/npm"
	"github.com/sandtrail/sandtrail/registry-mirror/verify"
	"github.com/sandtrail/sandtrail/resolver"
)

// Item is one artifact to prefetch.
type Item struct {
	Ecosystem string
	Name      string
	Version   string
	// Path is the mirror path of the artifact, or for PyPI of the project
	// page whose files of Version are fetched.
	Path string
	// Want are the digests the lockfile pins (any one must match).
	Want []verify.Digest
}

// mirrorPath is where the mirror serves ecosystem eco (its registry prefix,
// resolver.Ecosystem.MirrorPrefix), relative to the mirror's base URL.
func mirrorPath(eco string) string {
	e, _ := resolver.Lookup(eco) // one of the resolver's constants
	return strings.TrimPrefix(e.MirrorPrefix(), "/")
}

// ErrFormat is returned for a file none of the parsers knows.
var ErrFormat = errors.New("prefetch: not a package-lock.json, npm-shrinkwrap.json, Cargo.lock or requirements file")

// maxFile bounds a lockfile.
const maxFile = 64 << 20

// Parse reads the lockfile named name.
func Parse(name string, b []byte) ([]Item, error) {
	if len(b) > maxFile {
		return nil, fmt.Errorf("prefetch: %s is larger than %d bytes", name, maxFile)
	}
	switch base := filepath.Base(name); {
	case base == "package-lock.json" || base == "npm-shrinkwrap.json":
		return NpmLock(b)
	case base == "Cargo.lock":
		return CargoLock(b)
	case strings.HasSuffix(base, ".txt") || strings.HasSuffix(base, ".in"):
		return Requirements(b)
	}
	return nil, fmt.Errorf("%w: %s", ErrFormat, name)
}

// NpmLock reads a package-lock.json (lockfileVersion 2 or 3): every
// package installed from a registry tarball.
func NpmLock(b []byte) ([]Item, error) {
	var l struct {
		Packages map[string]struct {
			Version   string `json:"version"`
			Resolved  string `json:"resolved"`
			Integrity string `json:"integrity"`
			Link      bool   `json:"link"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("prefetch: package-lock.json: %w", err)
	}
	var items []Item
	for key, p := range l.Packages {
		i := strings.LastIndex(key, "node_modules/")
		if key == "" || i < 0 || p.Link || p.Resolved == "" {
			continue // the root, a link, or not from a registry
		}
		name := key[i+len("node_modules/"):]
		u, err := url.Parse(p.Resolved)
		if err != nil || !strings.HasSuffix(u.Path, ".tgz") || npm.CheckName(name) != nil || strings.HasPrefix(path.Base(u.Path), ".") {
			return nil, fmt.Errorf("prefetch: package-lock.json: %s: not a registry tarball (%q)", event.Clip(key, 100), event.Clip(p.Resolved, 100))
		}
		it := Item{Ecosystem: resolver.NPM, Name: name, Version: p.Version,
			Path: mirrorPath(resolver.NPM) + escapeNpm(name) + "/-/" + url.PathEscape(path.Base(u.Path))}
		if p.Integrity != "" {
			if it.Want, err = verify.SRI(p.Integrity); err != nil {
				return nil, fmt.Errorf("prefetch: package-lock.json: %s: %w", event.Clip(key, 100), err)
			}
		}
		items = append(items, it)
	}
	return items, nil
}

func escapeNpm(name string) string {
	if scope, pkg, ok := strings.Cut(name, "/"); ok {
		return url.PathEscape(scope) + "%2f" + url.PathEscape(pkg)
	}
	return url.PathEscape(name)
}

// CargoLock reads a Cargo.lock: every package from a registry.
func CargoLock(b []byte) ([]Item, error) {
	var l struct {
		Package []struct {
			Name     string `toml:"name"`
			Version  string `toml:"version"`
			Source   string `toml:"source"`
			Checksum string `toml:"checksum"`
		} `toml:"package"`
	}
	if err := toml.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("prefetch: Cargo.lock: %w", err)
	}
	var items []Item
	for _, p := range l.Package {
		if !strings.HasPrefix(p.Source, "registry+") && !strings.HasPrefix(p.Source, "sparse+") {
			continue // a path or git dependency
		}
		if crates.CheckName(p.Name) != nil || p.Version == "" || strings.ContainsAny(p.Version, "/\\?#") || strings.HasPrefix(p.Version, ".") {
			return nil, fmt.Errorf("prefetch: Cargo.lock: bad package %q %q", event.Clip(p.Name, 100), event.Clip(p.Version, 100))
		}
		it := Item{Ecosystem: resolver.Cargo, Name: p.Name, Version: p.Version,
			Path: mirrorPath(resolver.Cargo) + "dl/" + url.PathEscape(p.Name) + "/" + url.PathEscape(p.Version) + "/download"}
		if p.Checksum != "" {
			d, err := verify.Hex(verify.SHA256, p.Checksum)
			if err != nil {
				return nil, fmt.Errorf("prefetch: Cargo.lock: %s %s: %w", p.Name, p.Version, err)
			}
			it.Want = []verify.Digest{d}
		}
		items = append(items, it)
	}
	return items, nil
}

// requirement is one "name==version" pin, extras and markers allowed.
var requirement = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*===?\s*([A-Za-z0-9.+!_-]+)\s*(;.*)?$`)

// Requirements reads a pip requirements file: every "name==version" pin,
// with its --hash=sha256:HEX options. Lines that pin nothing (ranges,
// options, -r includes, URLs) are skipped.
func Requirements(b []byte) ([]Item, error) {
	pypi, _ := resolver.Lookup(resolver.PyPI)
	var items []Item
	for _, line := range logicalLines(b) {
		fields := strings.Fields(line)
		var spec []string
		var want []verify.Digest
		for _, f := range fields {
			if h, ok := strings.CutPrefix(f, "--hash="); ok {
				alg, hx, _ := strings.Cut(h, ":")
				if alg != verify.SHA256 {
					continue
				}
				d, err := verify.Hex(alg, hx)
				if err != nil {
					return nil, fmt.Errorf("prefetch: requirements: %w", err)
				}
				want = append(want, d)
				continue
			}
			spec = append(spec, f)
		}
		m := requirement.FindStringSubmatch(strings.Join(spec, " "))
		if m == nil {
			continue
		}
		name := pypi.NormalizeName(m[1])
		items = append(items, Item{Ecosystem: resolver.PyPI, Name: name, Version: m[3],
			Path: mirrorPath(resolver.PyPI) + "simple/" + url.PathEscape(name) + "/", Want: want})
	}
	return items, nil
}

// logicalLines joins continued lines and drops comments and blank lines.
func logicalLines(b []byte) []string {
	var out []string
	var cur strings.Builder
	for _, raw := range bytes.Split(b, []byte("\n")) {
		l := strings.TrimRight(string(raw), "\r")
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			l = ""
		}
		cont := strings.HasSuffix(l, "\\")
		cur.WriteString(strings.TrimSuffix(l, "\\"))
		cur.WriteString(" ")
		if cont {
			continue
		}
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	return out
}
