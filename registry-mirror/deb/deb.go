// Package deb is the mirror's Debian archive (apt). It serves one or more
// upstream archives, each under a name: beneath the mirror's /debian/
// prefix as /debian/<name>/dists/… and /debian/<name>/pool/… (remap mode,
// for a sources.list line "deb http://MIRROR/debian/debian bookworm
// main"), and in HTTP-proxy mode as the archive's own absolute URLs (apt
// with Acquire::http::Proxy=http://MIRROR/ sends "GET
// http://deb.debian.org/debian/dists/… HTTP/1.1"). The upstreams are
// configured as deb=URL (the archive named "debian") and
// deb/NAME=URL; each value may begin with "[signed-by=KEYRING] ", as in
// sources.list. With none configured, "debian" is
// http://deb.debian.org/debian/ and "debian-security" is
// http://deb.debian.org/debian-security/, both checked against
// DefaultKeyring.
//
// Trust model: apt's chain of trust, checked by the mirror before it
// serves a byte, and failing closed.
//
//   - dists/<suite>/InRelease must carry a good OpenPGP signature (one
//     signature packet by an unexpired, unrevoked key of the archive's
//     keyring suffices, as with gpgv) over exactly the text the mirror
//     reads; nothing but whitespace may surround the signed message.
//     Release with Release.gpg (a detached signature) is checked the same
//     way. A Release whose Valid-Until has passed, or whose Suite and
//     Codename both differ from the suite asked for, is refused.
//   - Every other file under dists/<suite>/ (Packages, Sources,
//     Translation, Contents, …, and by-hash/SHA256/<hex> paths) must be
//     listed in that verified Release's SHA256 list, and is served only
//     when its bytes match that sha256 and size. A file the Release does
//     not list is refused.
//   - A .deb (or .udeb) under pool/ must be listed by a verified Packages
//     file of the archive, and is served only when its bytes match that
//     paragraph's SHA256 and Size. The mirror does not know which suite
//     a pool path belongs to, so it does not fetch indexes on its own: a
//     .deb that no Packages file it has served lists is refused (apt
//     always fetches the indexes, through the same mirror, before it
//     downloads).
//
// The mirror remembers, per archive, the last verified Packages files it
// served (their URL, sha256 and size, in the cache's metadata, so that
// restarts keep them). Their bytes stay in the content-addressed cache;
// an index of each (filename → sha256, size, package, version) is built
// in memory by a streaming parse, and the indexes held in memory are
// bounded by maxIndexed entries, least recently used dropped first and
// rebuilt (refetched and verified again if the cache evicted the file)
// when needed.
//
// Packages files are read compressed as the client fetched them (.gz,
// .xz with a dictionary bounded at 64 MiB, .bz2 or none), after their
// sha256 matched.
//
// Every .deb served or refused is a pkg.fetch record (Name the package,
// Version its version), and so is every index file refused
// (signature_invalid, hash_mismatch, or blocked when not listed).
// Not checked: a Release's Date in the future (apt's "not valid yet").
// Not supported: flat repositories (no dists/), suites with a slash,
// pdiff patches (listed only in their Index file; apt falls back to the
// whole Packages file), and pool files that only Sources lists.
package deb

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver"
)

// Ecosystem is the purl type of Debian packages.
const Ecosystem = resolver.Deb

// DefaultUpstream is Debian's archive, the upstream named "debian".
const DefaultUpstream = "http://deb.debian.org/debian/"

// DefaultKeyring is the debian-archive-keyring package's keyring.
const DefaultKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// defaultName is the name of the archive configured as deb=URL.
const defaultName = "debian"

// Defaults are the archives served when none is configured, by name.
var Defaults = map[string]string{"": DefaultUpstream, "debian-security": "http://deb.debian.org/debian-security/"}

// Errors of the chain of trust.
var (
	// ErrSignature: an InRelease or Release.gpg has no good signature by
	// a key of the archive's keyring, or is not one signed message.
	ErrSignature = errors.New("deb: bad Release signature")
	// ErrExpired: the Release's Valid-Until has passed.
	ErrExpired = errors.New("deb: the Release has expired (Valid-Until has passed)")
	// ErrSuite: the Release is another suite's.
	ErrSuite = errors.New("deb: the Release is not the suite's")
	// ErrSyntax: a Release or Packages file is malformed.
	ErrSyntax = errors.New("deb: malformed control data")
	// ErrPath: a request path is not a path of an archive.
	ErrPath = errors.New("deb: bad archive path")
)

// Handler serves the configured archives.
type Handler struct {
	env       *fetch.Env
	archives  []*archive // by name
	artifacts *fetch.Artifacts
	pool      *pool

	releases cache.Group[*release]
	mu       sync.Mutex
	suites   map[string]*release // archive name + "\x00" + suite, bounded by maxSuites
}

// maxSuites bounds the verified Releases kept in memory.
const maxSuites = 256

// New returns the handler of the archives in upstreams: "" names the
// archive "debian", any other key the archive of that name; each value is
// "[signed-by=KEYRING] URL". With no upstream, Defaults.
func New(env *fetch.Env, upstreams map[string]string) (*Handler, error) {
	if len(upstreams) == 0 {
		upstreams = Defaults
	}
	h := &Handler{env: env, artifacts: fetch.NewArtifacts(env), suites: map[string]*release{}}
	h.pool = newPool(env, h.artifacts)
	for key, val := range upstreams {
		a, err := newArchive(key, val, env)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(h.archives, func(o *archive) bool { return o.name == a.name }) {
			return nil, fmt.Errorf("deb: two upstreams are named %q", a.name)
		}
		h.archives = append(h.archives, a)
	}
	slices.SortFunc(h.archives, func(a, b *archive) int { return strings.Compare(a.name, b.name) })
	return h, nil
}

// Hosts are the archives' hosts, which the mirror serves in HTTP-proxy
// mode.
func (h *Handler) Hosts() []string {
	var hosts []string
	for _, a := range h.archives {
		if !slices.Contains(hosts, a.base.Host) {
			hosts = append(hosts, a.base.Host)
		}
	}
	return hosts
}

// Serve serves path: beneath the prefix, "<name>/<archive path>"; in
// HTTP-proxy mode (r.URL is absolute) the upstream URL's path.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, path string) error {
	a, rel, err := h.archiveOf(r, path)
	if err != nil {
		return err
	}
	segs, err := splitPath(rel)
	if err != nil {
		return fetch.Errorf(http.StatusBadRequest, "bad_path", err, "%v", err)
	}
	switch {
	case len(segs) >= 3 && segs[0] == "dists":
		file := strings.Join(segs[2:], "/")
		if file == "InRelease" || file == "Release" || file == "Release.gpg" {
			return h.serveRelease(w, r, a, segs[1], file)
		}
		return h.serveIndex(w, r, a, segs[1], file)
	case len(segs) >= 2 && segs[0] == "pool" && (strings.HasSuffix(rel, ".deb") || strings.HasSuffix(rel, ".udeb")):
		return h.serveDeb(w, r, a, strings.Join(segs, "/"))
	}
	return fetch.Errorf(http.StatusNotFound, "not_found", nil, "the mirror serves an archive's dists/ and the .debs of its pool/ only, not %s", event.Clip(rel, 80))
}

// archiveOf finds the archive a request is for, and the path beneath it.
func (h *Handler) archiveOf(r *http.Request, path string) (*archive, string, error) {
	if r.URL.IsAbs() {
		host := strings.ToLower(r.URL.Host)
		var best *archive
		for _, a := range h.archives {
			if a.base.Host == host && strings.HasPrefix(path, a.base.EscapedPath()) && (best == nil || len(a.base.Path) > len(best.base.Path)) {
				best = a
			}
		}
		if best == nil {
			h.env.Record(&fetch.Record{Ecosystem: Ecosystem, Name: host, URL: r.URL.String(), Outcome: fetch.UnknownSource,
				Client: fetch.ClientOf(r.Context()), Verdict: "block", Reason: "no configured archive is at this URL", Rule: "mirror.upstreams"})
			return nil, "", fetch.Errorf(http.StatusForbidden, fetch.UnknownSource, nil, "no archive this mirror serves is at %s", event.Clip(r.URL.String(), 80))
		}
		return best, strings.TrimPrefix(path, best.base.EscapedPath()), nil
	}
	name, rel, _ := strings.Cut(path, "/")
	for _, a := range h.archives {
		if a.name == name {
			return a, rel, nil
		}
	}
	return nil, "", fetch.Errorf(http.StatusNotFound, "not_found", nil, "no archive named %q (the mirror serves %s)", event.Clip(name, 80), h.names())
}

func (h *Handler) names() string {
	var n []string
	for _, a := range h.archives {
		n = append(n, a.name)
	}
	return strings.Join(n, ", ")
}

// Bounds on a request path.
const (
	maxPath     = 1024
	maxSegments = 16
)

// splitPath splits an escaped archive path into its unescaped segments,
// refusing anything that could leave the archive: empty, "." and ".."
// segments, segments that begin with a dot, and any byte outside the
// characters Debian's archive paths use.
func splitPath(p string) ([]string, error) {
	if p == "" || len(p) > maxPath {
		return nil, fmt.Errorf("%w: empty or longer than %d bytes", ErrPath, maxPath)
	}
	segs := strings.Split(p, "/")
	if len(segs) > maxSegments {
		return nil, fmt.Errorf("%w: more than %d segments", ErrPath, maxSegments)
	}
	for i, s := range segs {
		u, err := url.PathUnescape(s)
		if err != nil || !validSegment(u) {
			return nil, fmt.Errorf("%w: segment %q", ErrPath, event.Clip(s, 80))
		}
		segs[i] = u
	}
	return segs, nil
}

// validSegment: non-empty, not beginning with '.', and only
// [A-Za-z0-9._+~-].
func validSegment(s string) bool {
	if s == "" || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '+', c == '~', c == '-':
		default:
			return false
		}
	}
	return true
}

// escapePath is an archive path as a URL path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
