package npm

import (
	"bufio"
	"bytes"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/shims"
)

// report is the Packages of the lock entries that an install added or
// changed in the tree at root, each marked direct when the invocation or
// a manifest asked for it.
func report(root string, before, after lock, ws []want, m manifest) []shims.Package {
	paths := changed(before, after)
	if len(paths) == 0 {
		return nil
	}
	named := map[string]want{}
	for _, w := range ws {
		if w.install != "" {
			named[w.install] = w
		}
	}
	deps := manifestDeps(after, m)
	sources := assignSources(paths, after, ws, named, m)
	direct := func(p string) bool {
		if strings.Count(p, "node_modules/") != 1 {
			return false
		}
		n := installName(p)
		_, byName := named[n]
		_, inManifest := deps[n]
		_, bySource := sources[p]
		return byName || inManifest || bySource
	}
	parents := after.parents()
	var out []shims.Package
	for _, p := range paths {
		pk := after.packageOf(p)
		pk.InstallScripts = installScripts(root, p, after[p])
		if direct(p) {
			pk.Direct = true
			n := installName(p)
			switch w, ok := named[n]; {
			case ok:
				pk.Requested = w.spec()
			case sources[p] != "":
				pk.Requested = sources[p]
			default:
				pk.Requested = deps[n]
			}
		} else {
			pk.RequestedBy = after.requestedBy(p, parents, direct)
		}
		out = append(out, pk)
	}
	return out
}

// manifestDeps are the dependencies of the root and workspace folders of
// a lock, and those of the package.json read before the install.
func manifestDeps(l lock, m manifest) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	for p, e := range l {
		if isPackagePath(p) {
			continue
		}
		for _, d := range []map[string]string{e.Dependencies, e.DevDependencies, e.OptionalDependencies, e.PeerDependencies} {
			for n, v := range d {
				if _, ok := out[n]; !ok {
					out[n] = v
				}
			}
		}
	}
	return out
}

// assignSources matches the source requests (git, URL, path), whose
// package names npm learns only from the package, to the changed
// top-level entries that are neither named by argv nor were in
// package.json before: path → the request's source.
func assignSources(paths []string, after lock, ws []want, named map[string]want, m manifest) map[string]string {
	var cands []string
	for _, p := range paths {
		n := installName(p)
		_, isNamed := named[n]
		_, wasDep := m[n]
		if strings.Count(p, "node_modules/") == 1 && !isNamed && !wasDep {
			cands = append(cands, p)
		}
	}
	rootDeps := manifestDeps(after, nil)
	out := map[string]string{}
	for _, w := range ws {
		if w.install != "" || len(cands) == 0 {
			continue
		}
		i := slices.IndexFunc(cands, func(p string) bool {
			v := rootDeps[installName(p)]
			return v != "" && (strings.Contains(v, w.req.Source) || strings.Contains(w.req.Source, strings.TrimPrefix(v, "file:")))
		})
		if i < 0 {
			i = 0
		}
		out[cands[i]] = w.req.Source
		cands = slices.Delete(cands, i, i+1)
	}
	return out
}

// registryFor is the registry that the invocation names for a package:
// --@scope:registry or --registry from argv, else from the environment,
// else from the project's or the user's .npmrc; the mirror is not
// reported when it is configured rather than named on argv.
func (s *session) registryFor(name string) string {
	keys := []string{"registry"}
	if sc := scopeOf(name); sc != "" {
		keys = []string{sc + ":registry", "registry"}
	}
	for _, k := range keys {
		if v := s.cfg.last(k); v != "" && v != "true" && v != "false" {
			return v
		}
	}
	for _, k := range keys {
		if v := s.getenv("npm_config_" + k); v != "" && !s.isMirror(v) {
			return v
		}
	}
	rc := s.npmrc()
	for _, k := range keys {
		if v := rc[k]; v != "" && !s.isMirror(v) {
			return v
		}
	}
	return ""
}

func (s *session) isMirror(u string) bool {
	return s.c.Mirror != "" && strings.HasPrefix(u, strings.TrimSuffix(s.c.Mirror, "/"))
}

// npmrc reads the registry keys of the project's and the user's .npmrc,
// the project's winning, with ${VAR} expanded as npm does.
func (s *session) npmrc() map[string]string {
	out := map[string]string{}
	user := s.cfg.last("userconfig")
	if user == "" || user == "true" {
		user = s.getenv("npm_config_userconfig")
	}
	if user == "" && s.getenv("HOME") != "" {
		user = filepath.Join(s.getenv("HOME"), ".npmrc")
	}
	files := []string{filepath.Join(s.dir, ".npmrc")}
	if user != "" {
		files = append(files, s.abs(user))
	}
	for _, f := range files {
		b, err := readCapped(f)
		if err != nil {
			continue
		}
		for k, v := range parseNpmrc(b, s.getenv) {
			if _, ok := out[k]; !ok {
				out[k] = v
			}
		}
	}
	return out
}

// parseNpmrc reads the registry and @scope:registry keys of an .npmrc
// (ini: key = value, ; and # comments, quoted values, ${VAR}).
func parseNpmrc(b []byte, getenv func(string) string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == ';' || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(expandEnv(k, getenv)), strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		if k == "registry" || strings.HasSuffix(k, ":registry") {
			out[k] = expandEnv(v, getenv)
		}
	}
	return out
}

// expandEnv replaces ${VAR} (not escaped as \${VAR}) as npm's config
// does.
func expandEnv(s string, getenv func(string) string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			break
		}
		if i > 0 && s[i-1] == '\\' {
			b.WriteString(s[:i-1] + s[i:i+j+1])
		} else {
			b.WriteString(s[:i] + getenv(s[i+2:i+j]))
		}
		s = s[i+j+1:]
	}
	b.WriteString(s)
	return b.String()
}
