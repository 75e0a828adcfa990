package pkgview

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/resolver"
)

// The kernel's read-back of what got installed. The shim reads back what
// its manager installed from the manager's own files (npm's hidden
// lockfile, pip's report, Cargo.lock), and only when it lives to the end:
// a shim killed after its check, a manager run around it, or an npm that a
// package's script started with flags of its own, is read back by nobody.
// The kernel records every file a session's processes create, with the
// creating process, so a package manifest's create (or the rename that
// puts it in place) says which package a process installed, whatever any
// shim claims. Each one is decided once the process that may still account
// for it has ended (see decider), and raises RuleUnverified when no
// verified fetch of the mirror's in the session accounts for its name
// (and its version, when the path holds one).
//
// Two kinds of install have no fetch to account for them and are exempt.
// A wheel the host bundles (WithSystemWheels): `python3 -m venv` runs
// ensurepip, which installs pip (and setuptools) from the host's own
// files; a dist-info of a system wheel's name and version passes, from
// wherever it came. And a local package (`pip install .`, `pip install -e
// .`, `npm install ./x.tgz`): a manifest that a shim decides passes when
// that shim, the process that sent it, claimed the package's name (and
// version, when both have one) from a file: source, the condition under
// which the claim rule exempts a claim. That is as strong as the claim
// rule for local sources, and no stronger: the shim reads the claim from
// its manager's report, which the agent can shape; a claim that another
// process sends, or about a manifest no shim decides, exempts nothing.

// manifest is a package that a manifest file's path names.
type manifest struct {
	eco, name string
	// version is the path's, when it has one (pip's dist-info, cargo's
	// registry source directory); npm's and dpkg's paths have none.
	version string
	// dir is an npm package's directory; parent is the package it is
	// nested in (node_modules/parent/node_modules/name), whose tarball may
	// bundle it (bundleDependencies), and parentDir that one's directory.
	dir, parent, parentDir string
}

// manifestOf says which installed package a created file is the manifest
// of: npm's <...>/node_modules/NAME/package.json (or @scope/NAME), with
// only packages between the first node_modules and it; pip's
// NAME-VERSION.dist-info/RECORD (which pip writes at install only), or
// its METADATA directly in a site-packages or dist-packages; cargo's
// registry/src/INDEX/NAME-VERSION/Cargo.toml; dpkg's
// /var/lib/dpkg/info/NAME.list. The suffix is tested first: most files
// are none of them.
func manifestOf(p string) (manifest, bool) {
	switch {
	case strings.HasSuffix(p, "/package.json"):
		return npmManifest(strings.TrimSuffix(p, "/package.json"))
	case strings.HasSuffix(p, "/RECORD"), strings.HasSuffix(p, "/METADATA"):
		return pipManifest(p)
	case strings.HasSuffix(p, "/Cargo.toml"):
		return cargoManifest(strings.TrimSuffix(p, "/Cargo.toml"))
	case strings.HasSuffix(p, ".list") && strings.HasPrefix(p, dpkgInfo):
		return dpkgManifest(p)
	}
	return manifest{}, false
}

// npmManifest reads dir, a package.json's directory, as a chain of
// packages from the first node_modules: a package directory in a
// package's own files (a test fixture's node_modules/x beneath
// node_modules/a/test/) is not one npm installed.
func npmManifest(dir string) (manifest, bool) {
	i := strings.Index(dir, "/node_modules/")
	if i < 0 {
		return manifest{}, false
	}
	segs := strings.Split(dir[i+len("/node_modules/"):], "/")
	var names []string
	for len(segs) > 0 {
		n := segs[0]
		if n == "" || n[0] == '.' {
			return manifest{}, false
		}
		segs = segs[1:]
		if n[0] == '@' {
			if len(segs) == 0 || segs[0] == "" || segs[0][0] == '.' {
				return manifest{}, false
			}
			n, segs = n+"/"+segs[0], segs[1:]
		}
		names = append(names, n)
		if len(segs) == 0 {
			break
		}
		if segs[0] != "node_modules" || len(segs) == 1 {
			return manifest{}, false
		}
		segs = segs[1:]
	}
	if len(names) == 0 {
		return manifest{}, false
	}
	m := manifest{eco: resolver.NPM, name: names[len(names)-1], dir: dir}
	if len(names) > 1 {
		m.parent = names[len(names)-2]
		m.parentDir = strings.TrimSuffix(dir, "/node_modules/"+m.name)
	}
	return m, true
}

// pipManifest reads a dist-info's RECORD, or METADATA in a site-packages
// or dist-packages. A dist-info elsewhere with only METADATA is a build's
// (pip's metadata preparation, bdist_wheel's staging), not an install;
// pip installs with --target or --prefix into a temporary directory
// first, where RECORD is written.
func pipManifest(p string) (manifest, bool) {
	dir, file := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	base, ok := strings.CutSuffix(path.Base(dir), ".dist-info")
	if !ok {
		return manifest{}, false
	}
	if file == "METADATA" {
		if site := path.Base(path.Dir(dir)); site != "site-packages" && site != "dist-packages" {
			return manifest{}, false
		}
	}
	// The wheel spec escapes - in both name and version as _, so the
	// first - ends the name.
	name, version, ok := strings.Cut(base, "-")
	if !ok || name == "" || version == "" {
		return manifest{}, false
	}
	return manifest{eco: resolver.PyPI, name: name, version: version}, true
}

// cargoManifest reads a registry source directory, NAME-VERSION beneath
// registry/src/<index>/. A name may hold - and digits (md-5), so the
// version is the first suffix after a - that is a version.
func cargoManifest(dir string) (manifest, bool) {
	src := path.Dir(path.Dir(dir))
	if path.Base(src) != "src" || path.Base(path.Dir(src)) != "registry" {
		return manifest{}, false
	}
	base := path.Base(dir)
	e, err := resolver.Lookup(resolver.Cargo)
	if err != nil {
		return manifest{}, false
	}
	for i := 1; i < len(base)-1; i++ {
		if base[i] != '-' || base[i+1] < '0' || base[i+1] > '9' {
			continue
		}
		if _, err := e.ParseVersion(base[i+1:]); err == nil {
			return manifest{eco: resolver.Cargo, name: base[:i], version: base[i+1:]}, true
		}
	}
	return manifest{}, false
}

const dpkgInfo = "/var/lib/dpkg/info/"

// dpkgManifest reads /var/lib/dpkg/info/NAME[:ARCH].list, which dpkg
// writes as NAME.list-new and renames when it unpacks a package.
func dpkgManifest(p string) (manifest, bool) {
	base := strings.TrimSuffix(strings.TrimPrefix(p, dpkgInfo), ".list")
	name, _, _ := strings.Cut(base, ":")
	if name == "" || strings.Contains(name, "/") {
		return manifest{}, false
	}
	return manifest{eco: resolver.Deb, name: name}, true
}

// placed is a manifest seen created, waiting for its decider's exit.
type placed struct {
	m   manifest
	seq uint64
	pid int32
	// path is where it was created.
	path string
	// shim is the shim whose exit decides it (decider), 0 when the
	// process's own exit does.
	shim int32
}

// localKey is a shim's claims of local packages of one name: the shim's
// pid and the ecosystem's name (keys).
type localKey struct {
	nameKey string
	pid     int32
}

// Bounds of a Watcher's kernel read-back per session.
const (
	maxPlaced   = 1 << 14 // manifests waiting for a decision
	maxAccounts = 4 * maxRows
)

// installedFile takes a file event and, when it creates (or renames into
// place) a package manifest, keeps the package for a decision at its
// decider's exit. Files of a host tree (the broker's apt and dpkg, which
// fetch through the mirror as root) are the host's, not the agent's.
func (s *state) installedFile(e *event.Event) {
	f := e.File
	if f == nil || f.Errno != "" || f.Dir || e.Proc == nil {
		return
	}
	var p string
	switch e.Kind {
	case event.KindFileCreate:
		p = f.Path
	case event.KindFileRename:
		p = f.NewPath
	default:
		return
	}
	m, ok := manifestOf(p)
	if !ok {
		return
	}
	pr := s.procs[e.Proc.Pid]
	if pr != nil && pr.host {
		return
	}
	if m.dir != "" && (!s.live || len(s.npmDirs) < maxAccounts) {
		s.npmDirs[m.dir] = e.Proc.Pid
	}
	nameKey, key := keys(m.eco, m.name, m.version)
	if s.accounted(m, nameKey, key, e.Proc.Pid) {
		return
	}
	seen := key
	if m.version == "" {
		seen = nameKey
	}
	if s.placedSeen[seen] {
		return
	}
	if s.live && (s.nPlaced >= maxPlaced || len(s.placedSeen) >= maxAccounts) {
		s.dropped++
		return
	}
	s.placedSeen[seen] = true
	d := s.decider(pr, e.Proc.Pid)
	pl := placed{m: m, seq: e.Seq, pid: e.Proc.Pid, path: p}
	if d != e.Proc.Pid {
		pl.shim = d
	}
	s.placed[d] = append(s.placed[d], pl)
	s.nPlaced++
}

// decider is the process whose exit decides a manifest that process pid
// (p, nil when unknown) created: the shim that ran its manager, while
// that shim lives, since the shim's pkg.install claims (which raise the
// same rule, with more to say) come before its exit; else the process
// itself. A shim killed before the manifest was created is not live, and
// the manager's own exit decides.
func (s *state) decider(p *proc, pid int32) int32 {
	if p != nil && p.shimPid != 0 && s.procs[p.shimPid] != nil {
		return p.shimPid
	}
	return pid
}

// accounted reports whether a verified fetch of the mirror's in the
// session accounts for a manifest that process pid created: one of its
// name and, when the path has it, version; or, for an npm package nested
// in another, of the package it is nested in, when that fetch's record
// lists the nested package in its bundles (what the mirror read of the
// tarball's metadata) and the same process created that one's manifest
// too. An npm that a package's script runs, installing into the
// package's own node_modules, is another process. A dist-info of a wheel
// the host bundles is accounted for by the host's file.
func (s *state) accounted(m manifest, nameKey, key string, pid int32) bool {
	if m.version != "" {
		if s.verifiedVersions[key] || m.eco == resolver.PyPI && s.o.systemWheels[key] {
			return true
		}
	} else if s.verifiedNames[nameKey] {
		return true
	}
	if m.parent != "" {
		pk, _ := keys(m.eco, m.parent, "")
		creator, ok := s.npmDirs[m.parentDir]
		return s.bundledBy[pk+"\x00"+m.name] && ok && creator == pid
	}
	return false
}

// localClaim records a claim of a local package (a file: source, which
// the claim rule exempts) by the process that sent it: the shim.
func (s *state) localClaim(e *event.Event) {
	p := e.Pkg
	if p == nil || e.Proc == nil || !strings.HasPrefix(p.SourceURL, "file:") {
		return
	}
	if s.live && len(s.localClaims) >= maxAccounts {
		s.dropped++
		return
	}
	if s.localClaims == nil {
		s.localClaims = map[localKey][]string{}
	}
	nameKey, _ := keys(p.Ecosystem, p.Name, "")
	k := localKey{nameKey, e.Proc.Pid}
	v := ""
	if p.Resolved != "" {
		v = normVersion(p.Ecosystem, p.Resolved)
	}
	if !slices.Contains(s.localClaims[k], v) && (!s.live || len(s.localClaims[k]) < maxRefs) {
		s.localClaims[k] = append(s.localClaims[k], v)
	}
}

// claimedLocal reports whether the shim that decides a manifest claimed
// its package from a local source: its name, and its version when both
// the path and the claim have one.
func (s *state) claimedLocal(pl placed, nameKey string) bool {
	if pl.shim == 0 {
		return false
	}
	vs, ok := s.localClaims[localKey{nameKey, pl.shim}]
	if !ok || pl.m.version == "" {
		return ok
	}
	want := normVersion(pl.m.eco, pl.m.version)
	return slices.ContainsFunc(vs, func(v string) bool { return v == "" || v == want })
}

// addAccount records a verified, served fetch of the mirror's by name
// and by version.
func (s *state) addAccount(nameKey, key string) {
	if s.live && len(s.verifiedVersions) >= maxAccounts {
		s.dropped++
		return
	}
	s.verifiedNames[nameKey] = true
	s.verifiedVersions[key] = true
}

// addBundles records that a verified fetch of the package of nameKey
// bundles the packages named.
func (s *state) addBundles(nameKey string, bundles []string) {
	for _, b := range bundles {
		if s.live && len(s.bundledBy) >= maxAccounts {
			s.dropped++
			return
		}
		s.bundledBy[nameKey+"\x00"+b] = true
	}
}

// decide raises RuleUnverified for each manifest that pid's exit decides
// and no verified fetch accounts for, once per package: a package the
// shim's claim already raised it for is not raised again.
func (s *state) decide(pid int32, e *event.Event) {
	ps, ok := s.placed[pid]
	if !ok {
		return
	}
	delete(s.placed, pid)
	s.nPlaced -= len(ps)
	for _, pl := range ps {
		s.decidePlaced(pl, e)
	}
}

func (s *state) decidePlaced(pl placed, e *event.Event) {
	m := pl.m
	nameKey, key := keys(m.eco, m.name, m.version)
	seen := key
	if m.version == "" {
		seen = nameKey
	}
	if s.accounted(m, nameKey, key, pl.pid) || s.claimedLocal(pl, nameKey) || s.claimAlerted[seen] || s.kernelAlerted[seen] {
		return
	}
	s.kernelAlerted[seen] = true
	for _, r := range s.byName[nameKey] {
		if !r.blocked && !r.unverifiedAlerted && (m.version == "" || r.pkg.Version == "" ||
			normVersion(m.eco, r.pkg.Version) == normVersion(m.eco, m.version)) {
			r.unverifiedAlerted = true
			r.pkg.Alerts = append(r.pkg.Alerts, RuleUnverified)
		}
	}
	what := render.Clean(m.name, 214)
	if m.version != "" {
		what += "@" + render.Clean(m.version, 64)
	}
	s.raise(alert(e, RuleUnverified, "installed package with no verified fetch",
		fmt.Sprintf("the kernel saw pid %d create %s: %s %s was installed; the mirror served no verified artifact of it in this session",
			pl.pid, render.Clean(pl.path, 512), render.Clean(m.eco, 16), what), pl.seq))
}

// flush decides every manifest still waiting (the session ended, or the
// record did, before its decider's exit) and returns the alerts raised.
func (s *state) flush(e *event.Event) []*event.Event {
	s.out = nil
	for _, pid := range slices.Sorted(maps.Keys(s.placed)) {
		s.decide(pid, e)
	}
	for _, pid := range slices.Sorted(maps.Keys(s.pth)) {
		s.pthExit(pid, e)
	}
	if !s.live {
		s.alerts = append(s.alerts, s.out...)
	}
	return s.out
}
