// Package oci is the mirror's OCI registry: the pull side of the OCI
// distribution API, beneath /v2/, in front of one upstream registry.
//
//   - GET /v2/ answers the API version check;
//   - GET and HEAD /v2/<name>/manifests/<tag|digest> serve a manifest or
//     an index, asking the upstream for the media types the client
//     accepts of the OCI index and manifest and the Docker manifest list
//     and v2 manifest;
//   - GET and HEAD /v2/<name>/blobs/<digest> serve a blob;
//   - GET /v2/<name>/tags/list lists the repository's tags.
//
// Trust model: the upstream registry is not trusted; a digest is. A blob
// and a manifest named by digest stream through a verifier into the cache
// and are served from it only when their bytes hash to that digest, and a
// blob also has the size the manifest that named it gave. A manifest named
// by tag is mutable by nature: the mirror hashes the bytes it serves, sends
// that digest as Docker-Content-Digest and records it, and refuses the
// manifest when the upstream sent a Docker-Content-Digest that differs.
// Names, tags and digests are checked against the distribution spec's
// grammar before anything is fetched, and manifests are bounded (4 MiB).
// The policy decides on every manifest and blob (the image is the
// repository, the version its tag or digest, the source its upstream
// URL); each one served or refused is recorded with its digest.
//
// The upstream's anonymous bearer tokens (a 401 with a WWW-Authenticate
// Bearer challenge, as Docker Hub sends) are fetched and sent to the
// upstream's host only.
package oci

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver"
)

// DefaultUpstream is Docker Hub's registry. The policy approves no OCI
// registry by default: the operator lists theirs.
const DefaultUpstream = "https://registry-1.docker.io"

// Ecosystem is the purl type of OCI images.
const Ecosystem = resolver.OCI

// Prefix is the path of the distribution API, which clients do not let
// one configure.
const Prefix = "/v2/"

// Handler serves one upstream registry.
type Handler struct {
	env       *fetch.Env // a copy of the mirror's, its Upstream with the registry's token auth
	upstream  string     // the API's root URL, ending in /v2/
	artifacts *fetch.Artifacts
	tags      cache.Group[*tagged]

	mu    sync.Mutex
	sizes map[string]int64 // "name@digest" → size, from the manifests served
}

// maxSizes bounds the descriptor sizes kept in memory.
const maxSizes = 1 << 16

// New returns the handler for the registry at upstream: its host, or the
// API's root beneath it, with or without the /v2/ that clients add
// (https://registry.example and https://registry.example/v2/ are one).
func New(env *fetch.Env, upstream *url.URL) *Handler {
	root := *upstream
	root.Path = strings.TrimSuffix(strings.TrimSuffix(root.Path, "/"), strings.TrimSuffix(Prefix, "/")) + Prefix
	root.RawPath = ""
	root.RawQuery, root.Fragment = "", ""
	e, up := *env, *env.Upstream
	c := http.DefaultClient
	if up.HTTP != nil {
		c = up.HTTP
	}
	up.HTTP = &http.Client{Transport: newTokenTransport(c, &root), Timeout: c.Timeout, CheckRedirect: c.CheckRedirect}
	e.Upstream = &up
	return &Handler{env: &e, upstream: root.String(), artifacts: fetch.NewArtifacts(&e), sizes: map[string]int64{}}
}

// Serve serves path, beneath /v2/.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, path string) error {
	if path == "" {
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write([]byte("{}\n"))
		return err
	}
	req, err := parsePath(path)
	if err != nil {
		return err
	}
	switch req.kind {
	case kindTags:
		return h.serveTags(w, r, req.name)
	case kindBlob:
		return h.record(r.Context(), req, func(rec *fetch.Record) error { return h.blob(w, r, req, rec) })
	}
	return h.record(r.Context(), req, func(rec *fetch.Record) error { return h.manifest(w, r, req, rec) })
}

// record runs serve and records what it served or refused.
func (h *Handler) record(ctx context.Context, req request, serve func(*fetch.Record) error) error {
	start := time.Now()
	rec := &fetch.Record{Ecosystem: Ecosystem, Name: req.name, Version: req.ref, Client: fetch.ClientOf(ctx),
		URL: h.url(req), Registry: h.upstream, Start: start}
	if req.digest != nil {
		rec.Hash = req.ref
	}
	err := serve(rec)
	h.env.Finish(rec, start, err)
	return err
}

// url is the upstream URL of a manifest or a blob.
func (h *Handler) url(req request) string {
	return h.upstream + req.name + "/" + req.kind + "/" + req.ref
}

// remember keeps the sizes of the descriptors of m, a manifest of name, for
// the requests for them that follow.
func (h *Handler) remember(name string, m *manifest) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range append(m.blobs, m.children...) {
		if len(h.sizes) >= maxSizes {
			clear(h.sizes)
		}
		if d.Size > 0 {
			h.sizes[name+"@"+d.Digest.String()] = d.Size
		}
	}
}

// sizeOf is the size a manifest of name gave digest; 0 when none did.
func (h *Handler) sizeOf(name, digest string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sizes[name+"@"+digest]
}
