package npm

import (
	"bufio"
	"bytes"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/resolver/ecosystem"
	"github.com/sandtrail/sandtrail/resolver/purl"
	"github.com/sandtrail/sandtrail/shims"
)

// report is the Packages of the lock entries at paths (what an install
// left in the tree at root), one per install path, each marked direct
// when the invocation or a manifest asked for it, and a bundled one
// (inBundle) with the purl of the package whose tarball carried it.
func report(root string, paths []string, after lock, ws []want, m manifest) []shims.Package {
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
		if pk.RequiredBy = after.requiredBy(p, parents); len(pk.RequiredBy) > 0 {
			pk.RequestedBy = pk.RequiredBy[0]
		}
		pk.Path = p
		if c := after.carrier(p); c != "" {
			cp := after.packageOf(c)
			pk.BundledIn = purl.Of(ecosystem.NPM, cp.Name, cp.Version)
		}
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

// registryFor is the registry that the invocation names for a package,
// as npm picks it: the package's @scope:registry, else registry, each
// from the first place that sets it: argv, the environment, the npmrc
// files. The mirror is not reported when it is configured (the
// environment, an npmrc) rather than named on argv: a key set to the
// mirror hides the same key of the places after it, which npm does not
// read (install.sh's global npmrc names the daemon's mirror, which a
// session's npm_config_registry overrides).
func (s *session) registryFor(name string) string {
	keys := []string{"registry"}
	if sc := scopeOf(name); sc != "" {
		keys = []string{sc + ":registry", "registry"}
	}
	rc := s.npmrc()
	for _, k := range keys {
		if v := s.cfg.last(k); v != "" && v != "true" && v != "false" {
			return v
		}
		for _, v := range []string{s.getenv("npm_config_" + k), rc[k]} {
			if v == "" {
				continue
			}
			if s.isMirror(v) {
				return ""
			}
			return v
		}
	}
	return ""
}

func (s *session) isMirror(u string) bool {
	return s.c.Mirror != "" && strings.HasPrefix(u, strings.TrimSuffix(s.c.Mirror, "/"))
}

// npmrc is the registry keys of the npmrc files, read once per session.
func (s *session) npmrc() map[string]string {
	if s.rc == nil {
		s.rc, s.rcErr = s.readNpmrcs()
	}
	return s.rc
}

// readNpmrcs reads the registry keys of the npmrc files npm 11 loads, in
// its order: the builtin one (<npm>/npmrc), the project's, the user's
// (userconfig from argv, the environment, the project's or the builtin
// file, else ~/.npmrc) and the global one (globalconfig likewise, else
// <prefix>/etc/npmrc with prefix from argv, the environment or those
// files). The project's wins, then the user's, the global and the
// builtin one, with ${VAR} expanded as npm does. A file that is there
// but is not a regular file is an error.
func (s *session) readNpmrcs() (map[string]string, error) {
	var builtin, project, user, global map[string]string
	get := func(key string) string {
		if v := s.cfg.last(key); v != "" && v != "true" {
			return v
		}
		if v := s.getenv("npm_config_" + key); v != "" {
			return v
		}
		for _, l := range []map[string]string{project, user, builtin} {
			if v := l[key]; v != "" {
				return v
			}
		}
		return ""
	}
	var err error
	if builtin, err = loadNpmrc(filepath.Join(s.defaultPrefix(), "lib", "node_modules", "npm", "npmrc"), s.getenv); err != nil {
		return nil, err
	}
	projectFile := filepath.Join(s.dir, ".npmrc")
	if project, err = loadNpmrc(projectFile, s.getenv); err != nil {
		return nil, err
	}
	userFile := get("userconfig")
	if userFile == "" && s.getenv("HOME") != "" {
		userFile = filepath.Join(s.getenv("HOME"), ".npmrc")
	}
	if userFile != "" && s.abs(userFile) != projectFile {
		if user, err = loadNpmrc(s.abs(userFile), s.getenv); err != nil {
			return nil, err
		}
	}
	globalFile := get("globalconfig")
	if globalFile == "" {
		prefix := get("prefix")
		if prefix == "" {
			prefix = s.defaultPrefix()
		}
		globalFile = filepath.Join(s.abs(prefix), "etc", "npmrc")
	}
	if global, err = loadNpmrc(s.abs(globalFile), s.getenv); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range []map[string]string{project, user, global, builtin} {
		for k, v := range l {
			if _, ok := out[k]; !ok && (k == "registry" || strings.HasSuffix(k, ":registry")) {
				out[k] = v
			}
		}
	}
	return out, nil
}

// loadNpmrc reads one npmrc file; an absent or unreadable one is empty,
// one that is not a regular file an error.
func loadNpmrc(f string, getenv func(string) string) (map[string]string, error) {
	b, err := readCapped(f)
	if errors.Is(err, ErrNotRegular) {
		return nil, err
	}
	if err != nil {
		return map[string]string{}, nil
	}
	return parseNpmrc(b, getenv), nil
}

// parseNpmrc reads the registry and @scope:registry keys of an .npmrc,
// and the prefix, userconfig and globalconfig keys that move the other
// files
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
		if k == "registry" || strings.HasSuffix(k, ":registry") || k == "prefix" || k == "userconfig" || k == "globalconfig" {
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
