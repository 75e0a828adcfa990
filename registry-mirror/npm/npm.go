// Package npm is the mirror's npm registry. Beneath its prefix it serves:
//
//   - packuments, full or abbreviated (Accept:
//     application/vnd.npm.install-v1+json), for plain and scoped names,
//     with every tarball URL rewritten onto the mirror (or, for npm itself
//     on a mirror of the public registry, onto registry.npmjs.org, which npm
//     fetches through the mirror and writes into lockfiles) and the versions the
//     policy refuses (blocklist, cooldown) removed, the dist-tags that
//     named them repaired;
//   - tarballs, each checked against dist.integrity (sha512 SRI) and
//     dist.shasum, and its registry signature (dist.signatures: ECDSA P-256
//     over "name@version:integrity") against the registry's keys, before
//     a byte is served;
//   - /-/npm/v1/keys and /-/npm/v1/attestations/*, which npm asks the
//     registry it is configured with.
//
// The full packument is always what is fetched upstream, since only it has
// the publish times (time) that the cooldown needs; the abbreviated form is
// derived from it. Each tarball's record says whether the version has
// provenance attestations, whether earlier versions had them and this one
// lost them (the mark of the malicious nx releases of August 2025), and
// which install scripts it runs. The packument is read by
// resolver/listing (ParsePackument), the one parser of the format, which
// policies/release shares; a publish time it cannot read is unknown here.
package npm

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// DefaultUpstream is the public npm registry.
const DefaultUpstream = "https://registry.npmjs.org/"

// Ecosystem is the purl type of npm packages.
const Ecosystem = resolver.NPM

// abbreviated is the media type of the abbreviated packument.
const abbreviated = "application/vnd.npm.install-v1+json"

// Handler serves one upstream npm registry.
type Handler struct {
	env      *fetch.Env
	upstream *url.URL
	prefix   string // the mirror's path prefix, for rewritten URLs

	packuments *fetch.Docs[*packument]
	artifacts  *fetch.Artifacts
	filterLog  fetch.FilterLog
	keys       *keyring

	mu          sync.Mutex
	renders     map[renderKey][]byte // rendered packuments (rendered)
	renderBytes int
	rendering   cache.Group[[]byte]
}

// maxParsed bounds the parsed packuments kept in memory.
const maxParsed = 512

// New returns the handler for upstream, served beneath prefix ("/npm/").
func New(env *fetch.Env, upstream *url.URL, prefix string) *Handler {
	u := *upstream
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	h := &Handler{env: env, upstream: &u, prefix: prefix, packuments: fetch.NewDocs[*packument](env, maxParsed),
		artifacts: fetch.NewArtifacts(env), renders: map[renderKey][]byte{}}
	h.keys = &keyring{h: h}
	return h
}

// Serve serves path, beneath the prefix.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, path string) error {
	switch {
	case path == "-/npm/v1/keys":
		return h.serveKeys(w, r)
	case strings.HasPrefix(path, "-/npm/v1/attestations/"):
		return h.serveAttestations(w, r, strings.TrimPrefix(path, "-/npm/v1/attestations/"))
	case strings.HasPrefix(path, "-/"):
		return fetch.Errorf(http.StatusNotFound, "not_found", nil, "the mirror does not serve /%s", event.Clip(path, 120))
	}
	if name, ver, ok := versionPath(path); ok {
		return h.serveVersion(w, r, name, ver)
	}
	name, file, err := splitPath(path)
	if err != nil {
		return err
	}
	if file != "" {
		return h.serveTarball(w, r, name, file)
	}
	return h.servePackument(w, r, name)
}

// versionPath reads "<name>/<version or dist-tag>" (also for an
// @scope/<name>), the registry's document of one version, which corepack
// asks for ("pnpm/latest").
func versionPath(p string) (name, ver string, ok bool) {
	un, err := url.PathUnescape(p)
	if err != nil || strings.Contains(un, "/-/") {
		return "", "", false
	}
	i := strings.LastIndexByte(un, '/')
	if i < 0 || strings.HasPrefix(un, "@") && strings.Count(un, "/") != 2 {
		return "", "", false
	}
	name, ver = un[:i], un[i+1:]
	if CheckName(name) != nil || ver == "" || len(ver) > 256 {
		return "", "", false
	}
	return name, ver, true
}

// splitPath reads "<name>", "@scope/<name>" (or "@scope%2f<name>"), and
// "<name>/-/<file>.tgz" into the package name and the tarball file.
func splitPath(p string) (name, file string, err error) {
	un, err := url.PathUnescape(p)
	if err != nil {
		return "", "", fetch.Errorf(http.StatusBadRequest, "bad_name", err, "bad path")
	}
	name, file, _ = strings.Cut(un, "/-/")
	if err := CheckName(name); err != nil {
		return "", "", fetch.Errorf(http.StatusBadRequest, "bad_name", err, "%v", err)
	}
	if file != "" && (strings.ContainsAny(file, "/\\") || !strings.HasSuffix(file, ".tgz") || strings.HasPrefix(file, ".")) {
		return "", "", fetch.Errorf(http.StatusBadRequest, "bad_name", nil, "bad tarball name %q", event.Clip(file, 120))
	}
	return name, file, nil
}

// CheckName accepts npm package names as the registry does
// (listing.CheckNpmName): the mirror's check of a client's path.
func CheckName(name string) error { return listing.CheckNpmName(name) }

// upstreamURL is the upstream URL of a registry path.
func (h *Handler) upstreamURL(path string) string { return h.upstream.String() + path }

// escapeName is a name as a registry path: a scope's slash escaped.
func escapeName(name string) string {
	if strings.HasPrefix(name, "@") {
		return "@" + url.PathEscape(name[1:])
	}
	return url.PathEscape(name)
}

// isNotFound reports an upstream 404.
func isNotFound(err error) bool {
	var e *fetch.Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// ctxClient is fetch.ClientOf.
func ctxClient(ctx context.Context) fetch.Client { return fetch.ClientOf(ctx) }
