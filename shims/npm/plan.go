package npm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/shims"
)

// want is one request and the folder name its package installs under
// ("" for a source request whose name is not known yet).
type want struct {
	req     shims.Request
	install string
}

// spec is the Requested of a package that want asked for.
func (w want) spec() string {
	if w.req.Source != "" {
		return w.req.Source
	}
	return w.req.Spec
}

// argvWants reads the package specs of argv.
func (s *session) argvWants(specs []string) []want {
	var ws []want
	for _, a := range specs {
		r, alias := parseSpec(a)
		r.Origin = "argv"
		if r.Source == "" {
			r.Registry = s.registryFor(r.Name)
		}
		in := r.Name
		if alias != "" {
			in = alias
		}
		ws = append(ws, want{req: r, install: in})
	}
	return ws
}

// manifest is the dependencies of package.json (dependencies,
// devDependencies, optionalDependencies and peerDependencies), name →
// spec.
type manifest map[string]string

// parseManifest reads a package.json's dependencies. A value that is not
// a string is kept as its JSON text, for npm to refuse.
func parseManifest(b []byte) (manifest, error) {
	var pj map[string]json.RawMessage
	if err := json.Unmarshal(b, &pj); err != nil {
		return nil, fmt.Errorf("parsing package.json: %w", err)
	}
	m := manifest{}
	for _, k := range []string{"peerDependencies", "optionalDependencies", "devDependencies", "dependencies"} {
		raw, ok := pj[k]
		if !ok || string(raw) == "null" {
			continue
		}
		var deps map[string]json.RawMessage
		if err := json.Unmarshal(raw, &deps); err != nil {
			return nil, fmt.Errorf("parsing package.json %s: %w", k, err)
		}
		for n, v := range deps {
			var str string
			if json.Unmarshal(v, &str) != nil {
				str = string(v)
			}
			m[n] = str
		}
	}
	return m, nil
}

// readManifest reads dir's package.json; an absent one has no
// dependencies.
func readManifest(dir string) (manifest, error) {
	b, err := readCapped(filepath.Join(dir, "package.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return manifest{}, nil
	}
	if err != nil {
		return nil, err
	}
	return parseManifest(b)
}

// manifestWants are the requests of a manifest, sorted by name.
func (s *session) manifestWants(m manifest, skip []string) []want {
	var ws []want
	for _, n := range slices.Sorted(maps.Keys(m)) {
		if slices.Contains(skip, n) {
			continue
		}
		r, alias := resolveSpec(n, m[n])
		if r.Name == "" && r.Source == "" {
			r = shims.Request{Name: n, Source: m[n]}
		}
		r.Origin = "package.json"
		if r.Source == "" {
			r.Registry = s.registryFor(r.Name)
		}
		ws = append(ws, want{req: r, install: cmp(alias, n)})
	}
	return ws
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// positional drops what npm would not read as a package spec.
func positional(args []string) []string {
	var out []string
	for _, a := range args {
		if a != "" {
			out = append(out, a)
		}
	}
	return out
}

// planInstall plans install, ci, update and their -test forms: the argv
// specs, else package.json's dependencies.
func (s *session) planInstall(cmd string, args []string) (*shims.Plan, error) {
	specs := positional(args)
	m, err := readManifest(s.dir)
	if err != nil {
		return nil, err
	}
	var ws []want
	switch {
	case s.global && len(specs) == 0:
		// npm install -g with no spec installs the current folder.
		ws = []want{{req: shims.Request{Source: s.c.Dir, Origin: "argv"}}}
	case len(specs) == 0:
		ws = s.manifestWants(m, nil)
	case cmd == "update":
		for _, w := range s.argvWants(specs) {
			if v, ok := m[w.install]; ok && w.req.Spec == "" {
				w.req.Spec = v
			}
			ws = append(ws, w)
		}
	default:
		ws = s.argvWants(specs)
	}
	return s.plan(ws, m, []bool{s.global})
}

// planReify plans the commands that rebuild the tree without adding to
// it (uninstall, prune, dedupe): what they may install is package.json's
// dependencies, less the packages removed.
func (s *session) planReify(args []string) (*shims.Plan, error) {
	m, err := readManifest(s.dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, w := range s.argvWants(positional(args)) {
		names = append(names, w.install)
	}
	if s.global {
		return s.plan(nil, manifest{}, []bool{true})
	}
	return s.plan(s.manifestWants(m, names), m, []bool{false})
}

// planLink plans npm link: with names it installs missing ones into the
// global folder and links them into the local tree, without it links the
// current package globally.
func (s *session) planLink(args []string) (*shims.Plan, error) {
	m, err := readManifest(s.dir)
	if err != nil {
		return nil, err
	}
	ws := s.argvWants(positional(args))
	if len(ws) == 0 {
		ws = s.manifestWants(m, nil)
	}
	return s.plan(ws, m, []bool{false, true})
}

// planFetch plans the commands that fetch specs without installing them
// into a tree (pack, cache add, diff): the specs are the requests, and
// nothing is read back. No spec, no plan.
func (s *session) planFetch(specs []string) (*shims.Plan, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	return &shims.Plan{Requests: requests(s.argvWants(specs))}, nil
}

// diffSpecs are the --diff values of npm diff that name a package, not
// a bare version of the current one.
func (s *session) diffSpecs() []string {
	var out []string
	for _, v := range s.cfg.vals["diff"] {
		if v == "" || v == "true" {
			continue
		}
		if r, _ := parseSpec(v); r.Source == "" && r.Name != "" && r.Name[0] >= '0' && r.Name[0] <= '9' {
			continue
		}
		out = append(out, v)
	}
	return out
}

// planInit plans npm init <initializer>, which runs npm exec of
// create-<initializer>; npm init alone writes a package.json.
func (s *session) planInit(args []string) (*shims.Plan, error) {
	args = positional(args)
	if len(args) == 0 {
		return nil, nil
	}
	return s.planExecSpecs([]string{initializer(args[0])})
}

// initializer is the package npm init <arg> runs, as lib/commands/init.js
// names it.
func initializer(a string) string {
	if strings.HasPrefix(a, "@") && !strings.Contains(a, "/") {
		scope, ver, hasVer := strings.Cut(a[1:], "@")
		if hasVer {
			return "@" + scope + "/create@" + ver
		}
		return "@" + scope + "/create"
	}
	r, _ := parseSpec(a)
	if r.Name == "" {
		return a
	}
	scope, base := "", r.Name
	if i := strings.IndexByte(r.Name, '/'); i >= 0 && strings.HasPrefix(r.Name, "@") {
		scope, base = r.Name[:i+1], r.Name[i+1:]
	}
	out := scope + "create-" + strings.TrimPrefix(base, "create-")
	if rest, ok := strings.CutPrefix(a, r.Name+"@"); ok {
		out += "@" + rest
	}
	return out
}

// planExec plans npm exec and npx: the --package specs, else the first
// argument.
func (s *session) planExec(args []string) (*shims.Plan, error) {
	var pkgs []string
	for _, p := range s.cfg.vals["package"] {
		if p != "true" && p != "" {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) == 0 {
		if len(args) == 0 || args[0] == "" {
			return nil, nil
		}
		pkgs = args[:1]
	}
	return s.planExecSpecs(pkgs)
}

func (s *session) planExecSpecs(pkgs []string) (*shims.Plan, error) {
	ws := s.argvWants(pkgs)
	before := s.npxSnapshot()
	p := &shims.Plan{Requests: requests(ws)}
	p.Collect = func(int) ([]shims.Package, error) { return s.collectNpx(before, ws) }
	return p, nil
}

func requests(ws []want) []shims.Request {
	var rs []shims.Request
	for _, w := range ws {
		rs = append(rs, w.req)
	}
	return rs
}

// plan is the plan of an install into the local tree, the global one or
// both. Collect reads the local tree's result: every package its hidden
// lockfile lists once the install ran, changed or not. The global folder,
// which has no lockfile and holds what other installs put there (npm
// itself), is diffed against its snapshot.
func (s *session) plan(ws []want, m manifest, trees []bool) (*shims.Plan, error) {
	var snaps []*snapshot
	for _, g := range trees {
		sn, err := s.snapshot(g)
		if err != nil {
			return nil, err
		}
		snaps = append(snaps, sn)
	}
	collect := func(int) ([]shims.Package, error) {
		var out []shims.Package
		for _, sn := range snaps {
			if sn.files != nil {
				tree, err := sn.result()
				if err != nil {
					return out, fmt.Errorf("reading the tree after the install: %w", err)
				}
				out = append(out, report(sn.root, installed(tree.hidden), tree.lock, ws, m)...)
				continue
			}
			after, err := sn.read()
			if err != nil {
				return out, fmt.Errorf("reading the tree after the install: %w", err)
			}
			out = append(out, report(sn.root, changed(sn.before, after), after, ws, m)...)
		}
		return out, nil
	}
	reqs := requests(ws)
	for _, sn := range snaps {
		for _, r := range sn.sources {
			// A registry that a request already names is checked once.
			if r.Registry == "" || !slices.ContainsFunc(reqs, func(q shims.Request) bool { return q.Registry == r.Registry }) {
				reqs = append(reqs, r)
			}
		}
	}
	return &shims.Plan{Requests: reqs, Collect: collect}, nil
}

// snapshot is a tree as it was before the install.
type snapshot struct {
	// root is the tree's root: the local prefix, or the workspace root
	// above it, whose node_modules npm installs into; for the global
	// folder <prefix>/lib.
	root  string
	files []string // its lockfiles; none for the global folder
	// sources are the checks its lockfiles ask for (lockRequests).
	sources []shims.Request
	cache   string    // the npm cache, for the global folder
	since   time.Time // when the snapshot was taken
	before  lock
}

func (s *session) snapshot(global bool) (*snapshot, error) {
	sn := &snapshot{since: time.Now().Add(-time.Second)}
	if global {
		sn.root = filepath.Join(s.globalPrefix(), "lib")
		sn.cache = s.cacheDir()
		var err error
		if sn.before, err = sn.read(); err != nil {
			return nil, fmt.Errorf("reading the tree before the install: %w", err)
		}
		return sn, nil
	}
	sn.root, sn.files = s.dir, treeLocks(s.dir)
	w, err := workspaceRoot(s.dir)
	if err != nil {
		return nil, err
	}
	if w != "" {
		sn.root, sn.files = w, treeLocks(w)
	}
	// Read now for the check: a lockfile that is not a regular file is
	// refused before npm runs, and the sources it names are checked.
	l, err := readLocks(append(treeLocks(s.dir), sn.files...)...)
	if err != nil {
		return nil, fmt.Errorf("reading the tree before the install: %w", err)
	}
	sn.sources = s.lockRequests(l)
	return sn, nil
}

// lockRequests are the checks that a tree's lockfiles ask for. npm
// fetches each package at its resolved URL as written (only the public
// registry's host is replaced by the configured registry,
// replace-registry-host's default), so an entry's registry, or its URL
// when it is not a registry's tarball, is checked as a --registry or a
// URL on argv would be: one request per registry and per other source.
// Links, local (file:) entries and the mirror's own URLs fetch nothing
// from elsewhere.
func (s *session) lockRequests(l lock) []shims.Request {
	seen := map[shims.Request]bool{}
	var out []shims.Request
	for _, k := range slices.Sorted(maps.Keys(l)) {
		e := l[k]
		u := e.Resolved
		if k == "" || e.Link || u == "" || strings.HasPrefix(u, "file:") || s.isMirror(u) {
			continue
		}
		r := shims.Request{Origin: "package-lock.json"}
		if base, ok := registryOf(k, e.Name, u); ok {
			r.Registry = base
		} else {
			r.Source = u
		}
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// registryOf is the registry whose tarball a lockfile entry's resolved
// URL u is (REGISTRY/NAME/-/FILE.tgz, NAME the entry's name or the last
// package of its path).
func registryOf(path, name, u string) (string, bool) {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return "", false
	}
	if i := strings.LastIndex(path, "node_modules/"); name == "" && i >= 0 {
		name = path[i+len("node_modules/"):]
	}
	i := strings.Index(u, "/"+name+"/-/")
	if name == "" || i < 0 {
		return "", false
	}
	return u[:i+1], true
}

// installedTree is a local tree after the install: hidden is its hidden
// lockfile (node_modules/.package-lock.json), which npm writes after
// every install (npm ci included) and which lists exactly the packages
// on disk, so not an optional dependency skipped on this platform; lock
// is hidden with the root and workspace folders of package-lock.json or
// npm-shrinkwrap.json, whose dependencies make the direct packages.
type installedTree struct {
	hidden, lock lock
}

// result reads the tree's lockfiles after the install. A tree without a
// hidden lockfile has nothing installed.
func (sn *snapshot) result() (installedTree, error) {
	hidden, err := readLocks(filepath.Join(sn.root, "node_modules", ".package-lock.json"))
	if err != nil {
		return installedTree{}, err
	}
	all, err := readLocks(sn.files...)
	if err != nil {
		return installedTree{}, err
	}
	l := maps.Clone(hidden)
	for k, e := range all {
		if _, ok := l[k]; !ok && !isPackagePath(k) {
			l[k] = e
		}
	}
	return installedTree{hidden: hidden, lock: l}, nil
}

// read reads the global folder's packages.
func (sn *snapshot) read() (lock, error) {
	l := readTree(sn.root)
	if hidden, err := readLocks(filepath.Join(sn.root, "node_modules", ".package-lock.json")); err == nil {
		for k, e := range hidden {
			l[k] = e
		}
	}
	fillFetched(l, cacheFetches(sn.cache, sn.since))
	return l, nil
}

// npxSnapshot records the modification times of the npx cache's
// lockfiles.
func (s *session) npxSnapshot() map[string]time.Time {
	out := map[string]time.Time{}
	dirs, _ := filepath.Glob(filepath.Join(s.npxCache(), "*"))
	for _, d := range dirs {
		if fi, err := os.Stat(filepath.Join(d, "package-lock.json")); err == nil {
			out[d] = fi.ModTime()
		}
	}
	return out
}

// npxCache is the folder npm exec installs into: <cache>/_npx.
func (s *session) npxCache() string { return filepath.Join(s.cacheDir(), "_npx") }

// cacheDir is npm's cache folder: --cache, npm_config_cache or ~/.npm.
func (s *session) cacheDir() string {
	cache := s.cfg.last("cache")
	if cache == "" || cache == "true" {
		cache = s.getenv("npm_config_cache")
	}
	if cache == "" {
		cache = filepath.Join(s.getenv("HOME"), ".npm")
	}
	return s.abs(cache)
}

// collectNpx reports the packages of the npx cache folders whose
// lockfile is new or was rewritten since before.
func (s *session) collectNpx(before map[string]time.Time, ws []want) ([]shims.Package, error) {
	var out []shims.Package
	for d, t := range s.npxSnapshot() {
		if bt, ok := before[d]; ok && bt.Equal(t) {
			continue
		}
		after, err := readLocks(treeLocks(d)...)
		if err != nil {
			return out, err
		}
		out = append(out, report(d, installed(after), after, ws, manifest{})...)
	}
	return out, nil
}
