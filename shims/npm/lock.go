package npm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/shims"
)

// ErrNotRegular is shims.ErrNotRegular, for errors.Is.
var ErrNotRegular = shims.ErrNotRegular

// maxFile caps what the planner reads of a lockfile or manifest.
const maxFile = 64 << 20

// entry is one package of a lockfile (lockfileVersion 2 or 3) packages
// map.
type entry struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	Resolved             string            `json:"resolved"`
	Integrity            string            `json:"integrity"`
	Link                 bool              `json:"link"`
	HasInstallScript     bool              `json:"hasInstallScript"`
	Dependencies         map[string]string `json:"dependencies"`
	DevDependencies      map[string]string `json:"devDependencies"`
	OptionalDependencies map[string]string `json:"optionalDependencies"`
	PeerDependencies     map[string]string `json:"peerDependencies"`
	// InBundle: the package came inside the tarball of a package above
	// it (a bundled dependency), not from a fetch of its own.
	InBundle bool `json:"inBundle"`
	// Bundles are the dependencies the package's own tarball carries
	// (bundleDependencies, or the older bundledDependencies).
	Bundles    bundles `json:"bundleDependencies"`
	BundlesOld bundles `json:"bundledDependencies"`
}

// bundles is a package.json's bundleDependencies: a list of names, or
// true for all of its dependencies (all). Any other value reads as none,
// never as an error, so that an odd field does not hide the entry.
type bundles struct {
	names []string
	all   bool
}

func (b *bundles) UnmarshalJSON(data []byte) error {
	var names []string
	if json.Unmarshal(data, &names) == nil {
		b.names = names
		return nil
	}
	var all bool
	if json.Unmarshal(data, &all) == nil {
		b.all = all
	}
	return nil
}

// bundles reports whether the package of e carries its dependency name
// in its own tarball.
func (e entry) bundles(name string) bool {
	for _, b := range []bundles{e.Bundles, e.BundlesOld} {
		if slices.Contains(b.names, name) {
			return true
		}
		if b.all {
			if _, ok := e.Dependencies[name]; ok {
				return true
			}
			if _, ok := e.OptionalDependencies[name]; ok {
				return true
			}
		}
	}
	return false
}

// lock is a parsed lockfile: its packages by path ("" is the root,
// "node_modules/a/node_modules/b" a nested one).
type lock map[string]entry

// parseLock reads a package-lock.json, npm-shrinkwrap.json or hidden
// lockfile. A lockfileVersion 1 file, which has no packages map, reads as
// empty.
func parseLock(b []byte) (lock, error) {
	var f struct {
		Packages map[string]json.RawMessage `json:"packages"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("parsing lockfile: %w", err)
	}
	l := lock{}
	for k, raw := range f.Packages {
		var e entry
		if json.Unmarshal(raw, &e) != nil {
			// One odd entry (a string where an object was meant) must
			// not hide the others: keep it as changed-looking.
			e = entry{Version: "?", Resolved: string(raw)}
		}
		l[k] = e
	}
	return l, nil
}

// readLocks reads the lockfiles of a tree rooted at dir (package-lock.json,
// npm-shrinkwrap.json and node_modules/.package-lock.json, the first one
// read winning for an entry) into one lock; absent files read as empty.
func readLocks(files ...string) (lock, error) {
	all := lock{}
	for _, f := range files {
		b, err := readCapped(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		l, err := parseLock(b)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		for k, e := range l {
			if _, ok := all[k]; !ok {
				all[k] = e
			}
		}
	}
	return all, nil
}

// pkgName is the name of the package at path p of the lock: its entry's
// name (an alias's real name), else what follows the last node_modules/.
func (l lock) pkgName(p string) string {
	if n := l[p].Name; n != "" {
		return n
	}
	return installName(p)
}

// installName is the folder name a path installs under ("@s/b" for
// "node_modules/a/node_modules/@s/b").
func installName(p string) string {
	if i := strings.LastIndex(p, "node_modules/"); i >= 0 {
		return p[i+len("node_modules/"):]
	}
	return path.Base(p)
}

// parentPath is the package path that p is nested in
// ("node_modules/a" for "node_modules/a/node_modules/@s/b"), "" for a
// top-level one.
func parentPath(p string) string {
	i := strings.LastIndex(p, "/node_modules/")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// carrier is the path of the package whose tarball brought the bundled
// package at p: the nearest enclosing package path that is not itself in
// a bundle; "" when p is not bundled, or nothing above it is a package
// (the root's or a workspace's own bundle, which was not fetched as an
// artifact).
func (l lock) carrier(p string) string {
	if !l[p].InBundle {
		return ""
	}
	for q := parentPath(p); q != ""; q = parentPath(q) {
		if !isPackagePath(q) {
			return ""
		}
		if e, ok := l[q]; ok && !e.InBundle {
			return q
		}
	}
	return ""
}

// isPackagePath reports whether p is an installed package (under a
// node_modules folder), not the root or a workspace folder.
func isPackagePath(p string) bool {
	return strings.HasPrefix(p, "node_modules/") || strings.Contains(p, "/node_modules/")
}

// installed are the package paths of l, in order.
func installed(l lock) []string {
	var out []string
	for p := range l {
		if isPackagePath(p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// changed are the package paths of after that are new or whose version,
// resolved or integrity differ from before, in order.
func changed(before, after lock) []string {
	var out []string
	for p, e := range after {
		if !isPackagePath(p) {
			continue
		}
		b, ok := before[p]
		if !ok || b.Version != e.Version || b.Resolved != e.Resolved || b.Integrity != e.Integrity || b.Link != e.Link {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// resolve finds the path that dependency name of the package at from
// resolves to, as node's module resolution walks up node_modules folders.
func (l lock) resolve(from, name string) (string, bool) {
	dir := from
	for {
		cand := name
		if dir != "" {
			cand = dir + "/node_modules/" + name
		} else {
			cand = "node_modules/" + name
		}
		if _, ok := l[cand]; ok {
			return cand, true
		}
		if dir == "" {
			return "", false
		}
		i := strings.LastIndex(dir, "/node_modules/")
		if i < 0 {
			// a top-level package or a workspace folder: the root is next.
			dir = ""
			continue
		}
		dir = dir[:i]
	}
}

// parents maps each package path to the paths that depend on it.
func (l lock) parents() map[string][]string {
	ps := map[string][]string{}
	for _, p := range slices.Sorted(maps.Keys(l)) {
		e := l[p]
		all := []map[string]string{e.Dependencies, e.OptionalDependencies, e.PeerDependencies}
		if !isPackagePath(p) {
			all = append(all, e.DevDependencies)
		}
		for _, deps := range all {
			for _, d := range slices.Sorted(maps.Keys(deps)) {
				if c, ok := l.resolve(p, d); ok && c != p && !slices.Contains(ps[c], p) {
					ps[c] = append(ps[c], p)
				}
			}
		}
	}
	return ps
}

// requiredBy names the packages whose dependencies resolve to p by
// node_modules path rules (parents), sorted; the
// root and workspace folders are not packages and are left out, so a
// package only the project asks for has none.
func (l lock) requiredBy(p string, parents map[string][]string) []string {
	var names []string
	for _, q := range parents[p] {
		if isPackagePath(q) {
			names = append(names, l.pkgName(q))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// installScripts are the install-time scripts the package at p declares,
// read from its installed package.json under root; "hasInstallScript"
// when the lock says it has some that cannot be read.
func installScripts(root, p string, e entry) []string {
	if !e.HasInstallScript {
		return nil
	}
	var pj struct {
		Scripts map[string]any `json:"scripts"`
	}
	b, err := readCapped(filepath.Join(root, filepath.FromSlash(p), "package.json"))
	if err == nil && json.Unmarshal(b, &pj) == nil {
		var out []string
		for _, s := range []string{"preinstall", "install", "postinstall"} {
			if _, ok := pj.Scripts[s]; ok {
				out = append(out, s)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return []string{"hasInstallScript"}
}

// packageOf is the Package of the lock entry at p.
func (l lock) packageOf(p string) shims.Package {
	e := l[p]
	pk := shims.Package{Name: l.pkgName(p), Version: e.Version, SourceURL: e.Resolved, Hash: e.Integrity}
	if e.Link {
		pk.Hash = ""
		pk.SourceURL = "file:" + e.Resolved
		if t, ok := l[e.Resolved]; ok {
			pk.Version = t.Version
			if t.Name != "" {
				pk.Name = t.Name
			}
		}
	}
	return pk
}

// readCapped reads a regular file of at most maxFile bytes (shims.ReadFile).
func readCapped(name string) ([]byte, error) { return shims.ReadFile(name, maxFile) }
