package cargo

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sandtrail/sandtrail/shims"
)

// maxManifest bounds the size of a manifest or lock file read.
const maxManifest = 16 << 20

// maxMembers bounds the workspace members read.
const maxMembers = 256

// depTables are the dependency tables of a manifest (and of each
// target.<cfg> table); cargo still accepts the underscore spellings.
var depTables = []string{"dependencies", "dev-dependencies", "dev_dependencies", "build-dependencies", "build_dependencies"}

// readTOML reads and parses a TOML file.
func readTOML(path string) (map[string]any, error) {
	b, err := readCapped(path)
	if err != nil {
		return nil, err
	}
	doc, err := parseTOML(string(b))
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	return doc, nil
}

// manifestDeps returns the requests a parsed manifest makes: its
// dependency tables, those of its target.<cfg> tables, its
// [workspace.dependencies], [patch.<source>] and [replace] tables. ws is
// the workspace's [workspace.dependencies], for `{ workspace = true }`.
func manifestDeps(doc map[string]any, origin string, ws map[string]any) []shims.Request {
	var out []shims.Request
	tables := []map[string]any{doc}
	if targets, ok := doc["target"].(map[string]any); ok {
		for _, k := range sortedKeys(targets) {
			if t, ok := targets[k].(map[string]any); ok {
				tables = append(tables, t)
			}
		}
	}
	for _, t := range tables {
		for _, name := range depTables {
			out = append(out, depsTable(t[name], origin, ws)...)
		}
	}
	if w, ok := doc["workspace"].(map[string]any); ok {
		out = append(out, depsTable(w["dependencies"], origin+" [workspace.dependencies]", nil)...)
	}
	if patch, ok := doc["patch"].(map[string]any); ok {
		for _, src := range sortedKeys(patch) {
			out = append(out, depsTable(patch[src], origin+" [patch."+src+"]", nil)...)
		}
	}
	return append(out, depsTable(doc["replace"], origin+" [replace]", nil)...)
}

// depsTable reads one dependency table.
func depsTable(v any, origin string, ws map[string]any) []shims.Request {
	t, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var out []shims.Request
	for _, key := range sortedKeys(t) {
		out = append(out, dep(key, t[key], origin, ws))
	}
	return out
}

// dep reads one dependency: "1.2" or a table of version, git, path,
// registry, package and workspace.
func dep(key string, v any, origin string, ws map[string]any) shims.Request {
	r := shims.Request{Name: key, Origin: origin}
	switch d := v.(type) {
	case string:
		r.Spec = d
	case map[string]any:
		if w, _ := d["workspace"].(scalar); w == "true" {
			if wd, ok := ws[key]; ok {
				r = dep(key, wd, origin, nil)
			}
		}
		if p, ok := d["package"].(string); ok {
			r.Name = p
		}
		if s, ok := d["version"].(string); ok {
			r.Spec = s
		}
		if g, ok := d["git"].(string); ok {
			r.Source = g
		} else if p, ok := d["path"].(string); ok {
			r.Source = "path:" + p
		}
		if reg, ok := d["registry"].(string); ok {
			r.Registry = reg
		} else if idx, ok := d["registry-index"].(string); ok {
			r.Registry = idx
		}
	default:
		// Not a form cargo accepts; keep the name so that it is checked.
	}
	r.Exact = exactOf(r.Spec)
	return r
}

// exactOf returns the version a cargo requirement pins: "=1.2.3" pins
// 1.2.3; a bare "1.2.3" is ^1.2.3 in a manifest, and "=1.2" is a range.
func exactOf(spec string) string {
	s := strings.TrimSpace(spec)
	if !strings.HasPrefix(s, "=") || strings.Contains(s, ",") {
		return ""
	}
	s = strings.TrimSpace(s[1:])
	if !fullVersion(s) {
		return ""
	}
	return s
}

// fullVersion reports whether s is a semver with three numeric parts.
func fullVersion(s string) bool {
	core, _, _ := strings.Cut(s, "+")
	core, _, _ = strings.Cut(core, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// findManifest returns the manifest cargo would use from dir: the nearest
// Cargo.toml in dir or above.
func findManifest(dir string) (string, bool) {
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Join(d, "Cargo.toml")
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
		if filepath.Dir(d) == d {
			return "", false
		}
	}
}

// workspaceRoot returns the manifest of the workspace that manifest (a
// parsed Cargo.toml at path) belongs to: itself when it has a
// [workspace], the one package.workspace names, or the nearest manifest
// above it that has a [workspace]; itself when there is none.
func workspaceRoot(path string, doc map[string]any) (string, map[string]any) {
	if _, ok := doc["workspace"].(map[string]any); ok {
		return path, doc
	}
	if pkg, ok := doc["package"].(map[string]any); ok {
		if w, ok := pkg["workspace"].(string); ok {
			p := filepath.Join(filepath.Dir(path), w, "Cargo.toml")
			if d, err := readTOML(p); err == nil {
				return p, d
			}
		}
	}
	for d := filepath.Dir(filepath.Dir(path)); ; d = filepath.Dir(d) {
		p := filepath.Join(d, "Cargo.toml")
		if wd, err := readTOML(p); err == nil {
			if _, ok := wd["workspace"].(map[string]any); ok {
				return p, wd
			}
		}
		if filepath.Dir(d) == d {
			return path, doc
		}
	}
}

// workspaceRequests reads the requests of the manifest at path, of its
// workspace root and of the root's members, and returns them with the
// workspace root's directory (where Cargo.lock lives).
func workspaceRequests(path string) ([]shims.Request, string, error) {
	doc, err := readTOML(path)
	if err != nil {
		return nil, filepath.Dir(path), err
	}
	rootPath, root := workspaceRoot(path, doc)
	rootDir := filepath.Dir(rootPath)
	var ws map[string]any
	if w, ok := root["workspace"].(map[string]any); ok {
		ws, _ = w["dependencies"].(map[string]any)
	}
	reqs := manifestDeps(doc, rel(rootDir, path), ws)
	if rootPath == path {
		for _, m := range members(rootDir, root) {
			if m == path {
				continue
			}
			md, err := readTOML(m)
			if err != nil {
				return nil, rootDir, err
			}
			reqs = append(reqs, manifestDeps(md, rel(rootDir, m), ws)...)
		}
	} else {
		reqs = append(reqs, manifestDeps(root, rel(rootDir, rootPath), ws)...)
	}
	return reqs, rootDir, nil
}

// members lists the manifests of a workspace root's members (globs).
func members(rootDir string, root map[string]any) []string {
	w, _ := root["workspace"].(map[string]any)
	list, _ := w["members"].([]any)
	var out []string
	for _, m := range list {
		s, ok := m.(string)
		if !ok {
			continue
		}
		dirs, _ := filepath.Glob(filepath.Join(rootDir, s))
		for _, d := range dirs {
			p := filepath.Join(d, "Cargo.toml")
			if _, err := os.Stat(p); err == nil && len(out) < maxMembers {
				out = append(out, p)
			}
		}
	}
	return out
}

func rel(base, path string) string {
	if r, err := filepath.Rel(base, path); err == nil {
		return r
	}
	return path
}

// readCapped reads a regular file of at most maxManifest bytes
// (shims.ReadFile).
func readCapped(path string) ([]byte, error) { return shims.ReadFile(path, maxManifest) }
