// Package crates is the mirror's crates.io registry: a sparse index (RFC
// 2789) beneath its prefix, over an upstream sparse index
// (https://index.crates.io/ by default). It serves:
//
//   - index/config.json, whose dl points back at the mirror
//     (dl/{crate}/{version}/download beneath the prefix). It has no api
//     and no auth-required: the mirror proxies no web API (publish, yank,
//     search) and forwards no credentials;
//   - the index files, index/1/<n>, index/2/<n>, index/3/<c>/<n> and
//     index/<ab>/<cd>/<name> (lower-case names), with the lines of the
//     versions the policy refuses (blocklist, cooldown on pubtime)
//     dropped and that recorded once per crate and session, and with an
//     ETag so that cargo's If-None-Match revalidation works;
//   - dl/<crate>/<version>/download: the .crate, fetched from the
//     upstream's own dl template and checked against its index line's
//     cksum (sha256) before a byte is served. Every .crate served or
//     refused is one record.
//
// Trust model: the upstream index is the authority for each version's
// cksum and pubtime (crates.io serves it over TLS); the download host is
// trusted for nothing, since its bytes must hash to the cksum. The client
// is trusted for nothing: names are checked before any upstream request,
// and a version is served only if its index line parsed. The index files
// and config.json are read by resolver/listing (ParseCrateIndex,
// ParseCrateConfig), the one parser of the format, which policies/release
// shares. Index lines that
// do not parse (bad JSON, a name of another crate, a version that is not
// semver, a cksum that is not sha256 hex, a bad pubtime, a version listed
// twice) are dropped from what is served and counted; a download of a
// version that has no valid line is refused (fail closed).
package crates

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver"
)

// DefaultUpstream is crates.io's sparse index.
const DefaultUpstream = "https://index.crates.io/"

// Ecosystem is the purl type of crates.
const Ecosystem = resolver.Cargo

// ErrNoLines: no line of an index file parses.
var ErrNoLines = errors.New("crates: no line of the index file parses")

// Handler serves one upstream sparse index.
type Handler struct {
	env      *fetch.Env
	upstream *url.URL // the index, ending in /
	prefix   string   // the mirror's path prefix, for the dl template

	metas     *fetch.Metas
	artifacts *fetch.Artifacts
	indexes   cache.Group[*index]
	filters   fetch.FilterLog

	mu     sync.Mutex
	parsed map[string]*index // by file name, bounded by maxParsedBytes
	bytes  int64             // of the parsed index files' bodies
}

// maxParsedBytes bounds the parsed index files kept in memory.
const maxParsedBytes = 64 << 20

// New returns the handler for upstream, served beneath prefix ("/crates/").
func New(env *fetch.Env, upstream *url.URL, prefix string) *Handler {
	u := *upstream
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return &Handler{env: env, upstream: &u, prefix: prefix, metas: fetch.NewMetas(env),
		artifacts: fetch.NewArtifacts(env), parsed: map[string]*index{}}
}

// Serve serves path, beneath the prefix.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, path string) error {
	p, err := url.PathUnescape(path)
	if err != nil {
		return fetch.Errorf(http.StatusBadRequest, "bad_name", err, "bad path")
	}
	switch rest, isIndex := strings.CutPrefix(p, "index/"); {
	case rest == "config.json":
		return h.serveConfig(w, r)
	case isIndex:
		name, err := indexName(rest)
		if err != nil {
			return err
		}
		return h.serveIndex(w, r, name)
	}
	if rest, ok := strings.CutPrefix(p, "dl/"); ok {
		name, version, err := downloadPath(rest)
		if err != nil {
			return err
		}
		return h.serveCrate(w, r, name, version)
	}
	return fetch.Errorf(http.StatusNotFound, "not_found", nil, "the mirror serves %sindex/ and %sdl/ only", h.prefix, h.prefix)
}
