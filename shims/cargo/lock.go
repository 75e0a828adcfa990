package cargo

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sandtrail/sandtrail/shims"
)

// lockPkg is one [[package]] of a Cargo.lock.
type lockPkg struct {
	Name, Version, Source, Checksum string
	// Deps are the dependency entries as written: "name",
	// "name version" or "name version (source)".
	Deps []string
}

// key identifies a package in a lock.
func (p lockPkg) key() string { return p.Name + " " + p.Version + " " + p.Source }

// parseLock parses a Cargo.lock: its [[package]] entries, with the
// checksums of the old format's [metadata] table filled in.
func parseLock(b []byte) ([]lockPkg, error) {
	doc, err := parseTOML(string(b))
	if err != nil {
		return nil, fmt.Errorf("parsing Cargo.lock: %w", err)
	}
	list, _ := doc["package"].([]any)
	meta, _ := doc["metadata"].(map[string]any)
	var out []lockPkg
	for _, e := range list {
		t, ok := e.(map[string]any)
		if !ok {
			continue
		}
		p := lockPkg{}
		p.Name, _ = t["name"].(string)
		p.Version, _ = t["version"].(string)
		p.Source, _ = t["source"].(string)
		p.Checksum, _ = t["checksum"].(string)
		deps, _ := t["dependencies"].([]any)
		for _, d := range deps {
			if s, ok := d.(string); ok {
				p.Deps = append(p.Deps, s)
			}
		}
		if p.Checksum == "" && p.Source != "" {
			p.Checksum, _ = meta[fmt.Sprintf("checksum %s %s (%s)", p.Name, p.Version, p.Source)].(string)
		}
		if p.Name != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// readLock reads the lock at path; a missing lock is empty.
func readLock(path string) ([]lockPkg, error) {
	b, err := readCapped(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseLock(b)
}

// lockState is what Collect compares: the lock's packages and the .crate
// files in CARGO_HOME's download cache.
type lockState struct {
	pkgs   []lockPkg
	crates map[string]bool // "name-version.crate"
}

// snapshot reads the lock and the cache.
func snapshot(lockPath, cargoHome string) (lockState, error) {
	pkgs, err := readLock(lockPath)
	return lockState{pkgs: pkgs, crates: cachedCrates(cargoHome)}, err
}

// cachedCrates lists the .crate files in $CARGO_HOME/registry/cache/*/.
func cachedCrates(cargoHome string) map[string]bool {
	out := map[string]bool{}
	m, _ := filepath.Glob(filepath.Join(cargoHome, "registry", "cache", "*", "*.crate"))
	for _, p := range m {
		out[filepath.Base(p)] = true
	}
	return out
}

// lockResult reports what the build has on disk once cargo ran: every
// registry package of after's lock whose .crate is in the download cache
// (downloaded now or by an earlier run; a lock's packages for other
// platforms are never downloaded and not reported), and every package of
// another source (git) that is new or changed since before. Local
// packages (workspace members, path dependencies: no source) are not
// reported. Direct packages are those a local package depends on, or that
// reqs name; RequestedBy is a parent on the way to a direct one.
func lockResult(before, after lockState, reqs []shims.Request) []shims.Package {
	old := map[string]string{}
	for _, p := range before.pkgs {
		old[p.key()] = p.Checksum
	}
	g := newGraph(after.pkgs)
	spec := map[string]string{}
	for _, r := range reqs {
		if _, ok := spec[r.Name]; !ok && r.Name != "" {
			spec[r.Name] = r.Spec
		}
	}
	var out []shims.Package
	for _, p := range after.pkgs {
		if p.Source == "" {
			continue
		}
		if isRegistry(p.Source) {
			if !after.crates[p.Name+"-"+p.Version+".crate"] {
				continue
			}
		} else if sum, had := old[p.key()]; had && sum == p.Checksum {
			continue
		}
		_, named := spec[p.Name]
		pkg := shims.Package{Name: p.Name, Version: p.Version, SourceURL: p.Source,
			Direct: g.direct[p.key()] || named}
		if p.Checksum != "" {
			pkg.Hash = "sha256:" + p.Checksum
		}
		if pkg.Direct {
			pkg.Requested = spec[p.Name]
		} else {
			pkg.RequestedBy = g.parent[p.key()]
		}
		out = append(out, pkg)
	}
	return out
}

// isRegistry reports whether a lock's source is a registry (an index,
// git or sparse), whose crates cargo downloads as .crate files.
func isRegistry(source string) bool {
	return strings.HasPrefix(source, "registry+") || strings.HasPrefix(source, "sparse+")
}

// graph is a lock's dependency graph, walked from the local packages.
type graph struct {
	direct map[string]bool   // key → a local package depends on it
	parent map[string]string // key → name of a package that depends on it
}

// newGraph walks pkgs breadth-first from the local ones, so that a
// transitive package's parent is on a shortest way to a direct one.
func newGraph(pkgs []lockPkg) graph {
	g := graph{direct: map[string]bool{}, parent: map[string]string{}}
	seen := map[string]bool{}
	var queue []lockPkg
	for _, p := range pkgs {
		if p.Source == "" {
			seen[p.key()] = true
			queue = append(queue, p)
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, d := range p.Deps {
			c, ok := resolveDep(pkgs, d)
			if !ok || seen[c.key()] {
				continue
			}
			seen[c.key()] = true
			if p.Source == "" {
				g.direct[c.key()] = true
			} else {
				g.parent[c.key()] = p.Name
			}
			queue = append(queue, c)
		}
	}
	return g
}

// resolveDep finds the package a dependency entry names.
func resolveDep(pkgs []lockPkg, entry string) (lockPkg, bool) {
	f := strings.Fields(entry)
	if len(f) == 0 {
		return lockPkg{}, false
	}
	src := ""
	if len(f) >= 3 {
		src = strings.TrimSuffix(strings.TrimPrefix(f[2], "("), ")")
	}
	for _, p := range pkgs {
		if p.Name == f[0] && (len(f) < 2 || p.Version == f[1]) && (src == "" || p.Source == src) {
			return p, true
		}
	}
	return lockPkg{}, false
}

// installs reads the keys of $root/.crates2.json ("name version (source)").
func installs(root string) (map[string]bool, error) {
	b, err := readCapped(filepath.Join(root, ".crates2.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	return parseCrates2(b)
}

// installDiff reports what cargo install added to .crates2.json. The file
// has no checksum; the hash is that of the .crate in the download cache,
// when exactly one cached file has the name and version.
func installDiff(before, after map[string]bool, cargoHome string, reqs []shims.Request) []shims.Package {
	var out []shims.Package
	keys := make([]string, 0, len(after))
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if before[k] {
			continue
		}
		name, rest, _ := strings.Cut(k, " ")
		version, src, _ := strings.Cut(rest, " ")
		p := shims.Package{Name: name, Version: version, Direct: true,
			SourceURL: strings.TrimSuffix(strings.TrimPrefix(src, "("), ")")}
		for _, r := range reqs {
			if r.Name == name {
				p.Requested = r.Spec
				break
			}
		}
		p.Hash = cachedHash(cargoHome, name, version)
		out = append(out, p)
	}
	return out
}

// cachedHash is "sha256:<hex>" of the one cached .crate of name@version.
func cachedHash(cargoHome, name, version string) string {
	m, _ := filepath.Glob(filepath.Join(cargoHome, "registry", "cache", "*", name+"-"+version+".crate"))
	if len(m) != 1 {
		return ""
	}
	f, err := shims.OpenRegular(m[0])
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
