package pkgview

import (
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/purl"
)

// Bounds of one session's state in a Watcher, which keeps only what the
// rules need; a Builder, which reads one session once, keeps everything but
// script file events beyond maxFiles.
const (
	maxRows      = 1 << 14
	maxProcs     = 1 << 16
	maxFiles     = 200  // non-sensitive file events kept per package
	maxSensitive = 1000 // sensitive file events kept per package
	maxConns     = 1000 // connections kept per package
	maxProcsKept = 1000 // script processes kept per package
)

// state is one session's packages and processes: what Build and a Watcher
// share, so that both run the same rules over the same joins. Events come
// in journal order.
type state struct {
	session string
	o       options
	live    bool // a Watcher's: no script attribution, bounded
	rows    map[string]*row
	order   []*row            // every row, blocked ones too, by first event
	byName  map[string][]*row // the rows of each ecosystem and name
	served  map[string]fetchRef
	// verified holds the digests of every artifact the mirror served
	// verified in the session, which an install's hash is looked up in.
	verified map[digest]bool
	procs    map[int32]*proc
	groups   map[groupKey]*group
	alerts   []*event.Event // a Builder's: every alert raised
	out      []*event.Event // the alerts raised by the event being added
	// dropped counts events a Watcher did not track, past a bound.
	dropped uint64
	// The kernel's read-back (installed.go): the names, and names with
	// versions, of the mirror's verified fetches; the manifests created,
	// by the pid whose exit decides them, and those seen; the packages
	// the claim rule and the kernel's raised RuleUnverified for.
	verifiedNames, verifiedVersions map[string]bool
	// bundledBy: a verified fetch of the package named by the key's
	// first part (a name key) bundles the package named by its second,
	// NUL-separated.
	bundledBy map[string]bool
	// verifiedBundles are the packages a verified artifact bundles, by
	// its digests.
	verifiedBundles             map[digest][]string
	placed                      map[int32][]placed
	nPlaced                     int
	placedSeen                  map[string]bool
	npmDirs                     map[string]int32 // npm package directory → its manifest's creator
	claimAlerted, kernelAlerted map[string]bool
	localClaims                 map[localKey][]string // the versions of local packages each shim claimed
	// The install-time behaviour rules' (conduct.go): the mirror's
	// addresses learned, the latest destination of each process that
	// runs no script, the files scripts planted, the addresses DNS
	// answered, and the .pth files waiting for their wheel's RECORD.
	mirrors  map[endpoint]bool
	lastDst  map[int32]endpoint
	planted  map[string]*plant
	resolved map[string]bool
	pth      map[int32][]pthFile
	// exited are the script groups of the latest script processes to
	// exit, by pid, oldest first in exitOrder: the mirror's record of a
	// process's request can be journaled after the kernel's of its exit.
	exited    map[int32]*group
	exitOrder []int32
	// early are the mirror's refusals of publishes by processes whose
	// fork and exec the view has yet to see, by pid, oldest first in
	// earlyOrder.
	early      map[int32]*event.Event
	earlyOrder []int32
	nWritten   int // files kept in the script groups' conduct
	// last is the latest event added, for the alerts of a flush.
	last *event.Event
	// ended: a Watcher saw the session's end.
	ended bool
}

// row is one package under construction.
type row struct {
	pkg     Package
	nameKey string
	blocked bool
	// bundled: a copy that came inside another package's artifact (a
	// claim with bundled_in); it joins no fetch.
	bundled  bool
	installs []fetchRef // the pkg.install events: seq and hash
	fetches  int        // every pkg.fetch, served or not
	served   []fetchRef
	refused  []fetchRef
	alerted  bool
	// unverifiedAlerted: the row has had its RuleUnverified alert.
	unverifiedAlerted bool
}

// fetchRef is a pkg event: its seq, hash, version, the mirror's outcome,
// whether the mirror verified the artifact and the packages it bundles.
type fetchRef struct {
	seq                    uint64
	hash, version, outcome string
	verified               bool
	bundles                []string
}

// proc is what the rules know of a live process.
type proc struct {
	pid int32
	// shim: the process descends from a shim that ran its manager as a
	// child (an install); image: its current image is a shim; viaShim: a
	// shim replaced itself with this image (a call without install
	// intent, exec'd), or with an image that in turn exec'd this one.
	// A shim's own exec covers the process itself, never its children:
	// `npm run x` through the shim must not exempt what x runs.
	shim, image, viaShim bool
	// under are the managers among its ancestors, self those it ran;
	// interp those whose modules its image, an interpreter, can run.
	under, self, interp manager
	// managerPid is the outermost manager of its ancestry, itself included.
	managerPid int32
	// shimPid is the nearest shim among its ancestors that ran a child
	// (the shim of an install), if any.
	shimPid int32
	// bypass: it is in a tree already alerted as a shim bypass.
	bypass bool
	// outside: its parent is not in the session (the host started it:
	// the session's first process, or the apt broker's apt-get). host: it
	// was outside and exec'd as root (the broker's apt and dpkg; the
	// agent cannot become root, and the session's first process has
	// dropped to the agent's uid by its exec). A host tree is never a
	// bypass.
	outside, host bool
	group         *group
}

func newState(session string, o options, live bool) *state {
	return &state{session: session, o: o, live: live, rows: map[string]*row{}, byName: map[string][]*row{},
		served: map[string]fetchRef{}, verified: map[digest]bool{}, procs: map[int32]*proc{}, groups: map[groupKey]*group{},
		verifiedNames: map[string]bool{}, verifiedVersions: map[string]bool{}, placed: map[int32][]placed{},
		bundledBy: map[string]bool{}, verifiedBundles: map[digest][]string{},
		placedSeen: map[string]bool{}, npmDirs: map[string]int32{}, claimAlerted: map[string]bool{}, kernelAlerted: map[string]bool{},
		mirrors: map[endpoint]bool{}, lastDst: map[int32]endpoint{}, planted: map[string]*plant{}, resolved: map[string]bool{},
		pth: map[int32][]pthFile{}, exited: map[int32]*group{}, early: map[int32]*event.Event{}}
}

// add takes the next event and returns the alerts it raises.
func (s *state) add(e *event.Event) []*event.Event {
	s.out = nil
	switch e.Kind {
	case event.KindPkgInstall:
		s.install(e)
		s.localClaim(e)
	case event.KindPkgFetch:
		switch {
		case !mirrorWritten(e):
		case isPublishRefusal(e):
			s.checkPublishRefusal(e)
		default:
			s.learnMirror(e)
			s.fetch(e)
		}
	case event.KindPkgBlocked:
		s.blocked(e)
	case event.KindFork:
		s.fork(e)
		s.publishProcessKnown(e)
	case event.KindExec:
		s.exec(e)
		s.conductExec(e)
		s.publishProcessKnown(e)
	case event.KindExit:
		if e.Proc != nil {
			s.rememberExit(e.Proc.Pid)
			delete(s.procs, e.Proc.Pid)
			delete(s.lastDst, e.Proc.Pid)
			s.decide(e.Proc.Pid, e)
			s.pthExit(e.Proc.Pid, e)
		}
	case event.KindNetConnect, event.KindNetSend:
		s.conn(e)
		s.conductConn(e)
	case event.KindNetDNS:
		s.learnAnswers(e)
	case event.KindSessionTerminate:
		s.last = e
		return s.flush(e)
	default:
		if e.Category() == "file" {
			s.checkModuleRead(e)
			s.installedFile(e)
			s.file(e)
			s.conductFile(e)
		}
	}
	s.last = e
	if !s.live {
		s.alerts = append(s.alerts, s.out...)
	}
	return s.out
}

// raise records an alert of the event being added.
func (s *state) raise(a *event.Event) { s.out = append(s.out, a) }

// keys returns a package's join keys: ecosystem and normalised name, and
// that with the normalised version.
func keys(eco, name, version string) (nameKey, key string) {
	nameKey = eco + "\x00" + resolver.NormalizeName(eco, name)
	return nameKey, nameKey + "\x00" + normVersion(eco, version)
}

// normVersion is a version as its ecosystem compares it ("v1.2.3" is
// "1.2.3" for npm, "1.0-alpha1" is "1.0a1" for PyPI).
func normVersion(eco, v string) string {
	e, err := resolver.Lookup(eco)
	if err != nil || !e.HasRanges() {
		return v
	}
	pv, err := e.ParseVersion(v)
	if err != nil {
		return v
	}
	return pv.String()
}

// rowFor returns the row of a package, made from e if new; nil past the
// bound.
func (s *state) rowFor(p *event.Pkg, version string, e *event.Event) *row {
	return s.rowAt(p, version, "", e)
}

// claimRow returns the row of a shim's claim: its package's, or for a
// bundled copy the row of its name and version in its carrier, which no
// fetch joins (the mirror's fetches of the name and version are of
// another copy).
func (s *state) claimRow(p *event.Pkg, e *event.Event) *row {
	if p.BundledIn == "" {
		return s.rowFor(p, p.Resolved, e)
	}
	carrier := p.BundledIn
	if eco, name, version, ok := carrierOf(p); ok {
		_, carrier = keys(eco, name, version)
	}
	r := s.rowAt(p, p.Resolved, "\x00bundled_in\x00"+carrier, e)
	if r != nil {
		r.bundled, r.pkg.BundledIn = true, p.BundledIn
	}
	return r
}

// carrierOf is the ecosystem, name and version of a bundled claim's
// carrier, from its bundled_in purl; not ok when that is no purl of the
// claim's ecosystem with a version.
func carrierOf(p *event.Pkg) (eco, name, version string, ok bool) {
	u, err := purl.Parse(p.BundledIn)
	if err != nil || u.Type != p.Ecosystem || u.Version == "" {
		return "", "", "", false
	}
	if _, name, err = resolver.FromPurl(u); err != nil {
		return "", "", "", false
	}
	return u.Type, name, u.Version, true
}

// rowAt is rowFor of the row keyed also by sub (a bundled copy's carrier).
func (s *state) rowAt(p *event.Pkg, version, sub string, e *event.Event) *row {
	nameKey, key := keys(p.Ecosystem, p.Name, version)
	key += sub
	if r := s.rows[key]; r != nil {
		return r
	}
	if s.live && len(s.rows) >= maxRows {
		s.dropped++
		return nil
	}
	r := &row{nameKey: nameKey, pkg: Package{Ecosystem: p.Ecosystem, Name: p.Name, Version: version, Time: e.TS}}
	s.rows[key] = r
	s.order = append(s.order, r)
	s.byName[nameKey] = append(s.byName[nameKey], r)
	return r
}

func (s *state) install(e *event.Event) {
	p := e.Pkg
	if p == nil {
		return
	}
	r := s.claimRow(p, e)
	if r == nil {
		return
	}
	s.addPath(r, p.Path)
	if len(r.installs) == 0 {
		q := &r.pkg
		q.Name, q.Version, q.Requested, q.SourceURL, q.Hash = p.Name, p.Resolved, p.Requested, p.SourceURL, p.Hash
		q.Direct, q.RequestedBy, q.RequiredBy, q.Manager, q.Pid = p.Direct, p.RequestedBy, p.RequiredBy, p.Manager, p.ManagerPid
		if p.Purl != "" {
			q.Purl = p.Purl
		}
		if len(p.InstallScripts) > 0 {
			q.InstallScripts = p.InstallScripts
		}
		if e.Proc != nil {
			q.UID = e.Proc.UID
		}
	}
	r.installs = s.appendRef(r.installs, fetchRef{seq: e.Seq, hash: p.Hash, version: p.Resolved})
	s.appendSeq(r, e)
	s.checkRow(r, e)
	s.checkVerified(r, e)
}

func (s *state) fetch(e *event.Event) {
	p := e.Pkg
	if p == nil || isMetadata(p) {
		return
	}
	r := s.rowFor(p, p.Resolved, e)
	if r == nil {
		return
	}
	r.fetches++
	s.appendSeq(r, e)
	q := &r.pkg
	if q.Purl == "" {
		q.Purl = p.Purl
	}
	if len(q.InstallScripts) == 0 {
		q.InstallScripts = p.InstallScripts
	}
	ref := fetchRef{seq: e.Seq, hash: p.Hash, version: p.Resolved, outcome: p.Outcome, verified: p.Verified != nil && *p.Verified,
		bundles: p.Bundles}
	if p.Outcome != "served" {
		r.refused = s.appendRef(r.refused, ref)
		if len(r.served) == 0 {
			q.Outcome, q.Rule, q.Reason, q.UpstreamURL, q.MirrorHash = p.Outcome, p.Rule, p.Reason, p.SourceURL, p.Hash
		}
		s.checkRow(r, e)
		return
	}
	if len(r.served) == 0 {
		q.Outcome, q.Rule, q.Reason, q.UpstreamURL, q.MirrorHash, q.Verified = p.Outcome, "", "", p.SourceURL, p.Hash, p.Verified
	}
	r.served = s.appendRef(r.served, ref)
	s.served[r.nameKey] = ref
	if p.Verified != nil && *p.Verified {
		s.addVerified(p.Hash)
		s.addVerifiedBundles(p.Hash, p.Bundles)
		_, key := keys(p.Ecosystem, p.Name, p.Resolved)
		s.addAccount(r.nameKey, key)
		s.addBundles(r.nameKey, p.Bundles)
	}
	// A version served now makes a claim of another version, by the
	// same name, one the mirror served only at other versions.
	for _, o := range s.byName[r.nameKey] {
		s.checkRow(o, e)
	}
}

// maxPath is the longest install path kept: no longer one exists
// (PATH_MAX).
const maxPath = 4096

// addPath records an install path of a row's claim, once.
func (s *state) addPath(r *row, path string) {
	if path == "" || len(path) > maxPath || slices.Contains(r.pkg.Paths, path) {
		return
	}
	if s.live && len(r.pkg.Paths) >= maxRefs {
		s.dropped++
		return
	}
	r.pkg.Paths = append(r.pkg.Paths, path)
}

// maxVerified bounds a Watcher's verified digests per session.
const maxVerified = 4 * maxRows

// addVerified records the digests of a hash the mirror served verified.
func (s *state) addVerified(h string) {
	for _, d := range digests(h) {
		if s.live && len(s.verified) >= maxVerified {
			s.dropped++
			return
		}
		s.verified[d] = true
	}
}

// addVerifiedBundles records the packages a verified artifact of digest
// h bundles.
func (s *state) addVerifiedBundles(h string, bundles []string) {
	if len(bundles) == 0 {
		return
	}
	for _, d := range digests(h) {
		if s.live && len(s.verifiedBundles) >= maxVerified {
			s.dropped++
			return
		}
		s.verifiedBundles[d] = bundles
	}
}

// mirrorWritten reports whether e, a pkg.fetch or pkg.filter, is the
// mirror's own record: only then is it an account of what was served. The
// mirror (root, outside every session) journals these itself with source
// mirror; one that a client sent through the ingest socket has source shim
// or api, set by the server, and is a claim that must never verify a
// package, join a shim's claim or give a BOM its hash.
func mirrorWritten(e *event.Event) bool { return e.Source == event.SourceMirror }

// maxRefs bounds a Watcher's installs, served and refused fetches kept
// per package: the first ones decide the rules.
const maxRefs = 64

func (s *state) appendRef(refs []fetchRef, ref fetchRef) []fetchRef {
	if s.live && len(refs) >= maxRefs {
		s.dropped++
		return refs
	}
	return append(refs, ref)
}

// appendSeq records e as one of a row's events; a Watcher, which makes no
// rows, keeps none.
func (s *state) appendSeq(r *row, e *event.Event) {
	if !s.live {
		r.pkg.Seqs = append(r.pkg.Seqs, e.Seq)
	}
}

// isMetadata reports whether a pkg.fetch is of PyPI core metadata (PEP
// 658), which is not what gets installed.
func isMetadata(p *event.Pkg) bool {
	return p.Ecosystem == resolver.PyPI && strings.HasSuffix(p.SourceURL, ".metadata")
}

func (s *state) blocked(e *event.Event) {
	p := e.Pkg
	if p == nil || s.live {
		return
	}
	r := &row{blocked: true, pkg: Package{Ecosystem: p.Ecosystem, Name: p.Name, Requested: p.Requested,
		SourceURL: p.SourceURL, Manager: p.Manager, Pid: p.ManagerPid, Purl: p.Purl, Time: e.TS,
		Rule: p.Rule, Reason: p.Reason, Seqs: []uint64{e.Seq}}}
	if e.Proc != nil {
		r.pkg.UID = e.Proc.UID
	}
	s.order = append(s.order, r)
}

// carrierRow is the row of the package a bundled claim names as its
// carrier, nil when there is none (or bundled_in is no purl).
func (s *state) carrierRow(p *event.Pkg) *row {
	eco, name, version, ok := carrierOf(p)
	if !ok {
		return nil
	}
	_, key := keys(eco, name, version)
	return s.rows[key]
}

// carrierBundles reports whether the mirror served a carrier's artifact
// verified in the session, one that bundles the package name: a verified
// fetch of its row, or a verified artifact with the hash of its claim (an
// alias's, fetched by another name), whose record lists name in its
// bundles. Only the mirror says what an artifact bundles; the shim's
// claim and the lockfile it read are the agent's.
func (s *state) carrierBundles(c *row, name string) bool {
	if c.bundled {
		return false
	}
	if slices.ContainsFunc(c.served, func(f fetchRef) bool { return f.verified && slices.Contains(f.bundles, name) }) {
		return true
	}
	for _, in := range c.installs {
		for _, d := range digests(in.hash) {
			if s.verified[d] && slices.Contains(s.verifiedBundles[d], name) {
				return true
			}
		}
	}
	return false
}

// nestedIn reports whether an install path is inside the folder of one
// of paths: below its node_modules.
func nestedIn(path string, paths []string) bool {
	return slices.ContainsFunc(paths, func(c string) bool { return c != "" && strings.HasPrefix(path, c+"/node_modules/") })
}
