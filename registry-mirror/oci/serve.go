package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/verify"
)

// decide asks the policy about the image a request names, and refuses it
// (403) unless the policy lets it through.
func (h *Handler) decide(ctx context.Context, req request, rec *fetch.Record) error {
	out, d := h.env.Decide(ctx, policies.PackageRequest{Ecosystem: Ecosystem, Name: req.name, Version: req.ref, Source: rec.URL})
	rec.Verdict = string(d.Verdict)
	if d.Verdict != policies.Allow {
		rec.Reason, rec.Rule = d.Reason, d.Rule
	}
	if out != fetch.Served {
		rec.Outcome = out
		return fetch.Errorf(http.StatusForbidden, out, nil, "%s@%s is refused by the policy (%s): %s", req.name, event.Clip(req.ref, 120), d.Rule, d.Reason)
	}
	return nil
}

// refuse turns a failed verification into a 403 recorded as a hash
// mismatch, and verified bytes that are no manifest the mirror serves into
// a 502; other errors pass through.
func refuse(err error, rec *fetch.Record, req request) error {
	switch {
	case fetch.Mismatch(err):
		return rec.Refused(fetch.HashMismatch, err, "%s %s@%s does not match its digest", req.kind, req.name, event.Clip(req.ref, 120))
	case errors.Is(err, ErrBadManifest):
		return fetch.Errorf(http.StatusBadGateway, fetch.UpstreamError, err, "the upstream's manifest %s@%s: %v", req.name, event.Clip(req.ref, 120), err)
	}
	return err
}

// blob serves a blob once it matched its digest, and the size its
// manifest gave, filling rec.
func (h *Handler) blob(w http.ResponseWriter, r *http.Request, req request, rec *fetch.Record) error {
	if err := h.decide(r.Context(), req, rec); err != nil {
		return err
	}
	want := fetch.Want{URL: rec.URL, Digests: []verify.Digest{*req.digest}, Names: []string{req.ref}, Size: h.sizeOf(req.name, req.ref),
		Ecosystem: Ecosystem, Name: req.name}
	a, f, hit, err := h.artifacts.Get(r.Context(), want)
	if err != nil {
		return refuse(err, rec, req)
	}
	defer f.Close()
	rec.ServedArtifact(a, hit)
	w.Header().Set("Docker-Content-Digest", req.ref)
	h.env.ServeRecorded(w, r, rec, a, f, "application/octet-stream")
	return nil
}

// manifest serves a manifest or an index, by digest once it matched it,
// by tag with the digest of the bytes served, filling rec.
func (h *Handler) manifest(w http.ResponseWriter, r *http.Request, req request, rec *fetch.Record) error {
	ctx := r.Context()
	if err := h.decide(ctx, req, rec); err != nil {
		return err
	}
	acc := accept(r.Header.Values("Accept"))
	var t *tagged
	var err error
	if req.digest != nil {
		t, err = h.byDigest(ctx, req, acc)
	} else {
		t, err = h.byTag(ctx, req, acc)
	}
	var m *manifest
	if err == nil {
		m, err = parseManifest(t.body)
	}
	if err != nil {
		return refuse(err, rec, req)
	}
	h.remember(req.name, m)
	rec.Hash, rec.Outcome, rec.Verified, rec.CacheHit, rec.MetadataStale = t.digest, fetch.Served, true, t.hit, t.stale
	rec.Bytes = int64(len(t.body))
	w.Header().Set("Content-Type", string(m.mediaType))
	w.Header().Set("Docker-Content-Digest", t.digest)
	w.Header().Set("ETag", `"`+t.digest+`"`)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(t.body))
	return nil
}

// tagged is a manifest's bytes and what the mirror knows of them.
type tagged struct {
	body []byte
	// digest is the sha256 digest of body, or the digest it was fetched
	// by and verified against.
	digest     string
	hit, stale bool
}

// byDigest fetches the manifest req names by digest through the cache,
// verified against it and bounded by maxManifest (or the size an index
// gave it).
func (h *Handler) byDigest(ctx context.Context, req request, acc string) (*tagged, error) {
	want := fetch.Want{URL: h.url(req), Digests: []verify.Digest{*req.digest}, Names: []string{req.ref}, Accept: acc, Max: maxManifest,
		Ecosystem: Ecosystem, Name: req.name}
	switch n := h.sizeOf(req.name, req.ref); {
	case n > maxManifest:
		return nil, fmt.Errorf("%w: its index gives it %d bytes, more than %d", verify.ErrTooLarge, n, maxManifest)
	case n > 0:
		want.Size = n
	}
	_, f, hit, err := h.artifacts.Get(ctx, want)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("reading a cached manifest: %w", err)
	}
	if len(b) > maxManifest {
		return nil, fmt.Errorf("%w: more than %d bytes", verify.ErrTooLarge, maxManifest)
	}
	return &tagged{body: b, digest: req.ref, hit: hit}, nil
}

// byTag returns the manifest a tag names: from the cache while it is
// fresh, else from the upstream (one fetch however many ask at once), else
// stale from the cache when the upstream cannot be reached. The cache
// keeps one per tag and Accept list.
func (h *Handler) byTag(ctx context.Context, req request, acc string) (*tagged, error) {
	now := h.env.Now()
	key := "oci:manifest:" + h.url(req) + "\n" + acc
	if m, err := h.env.Cache.GetMeta(key); err == nil && m.Age(now) < h.env.MetaTTL {
		return &tagged{body: m.Body, digest: sha256Digest(m.Body), hit: true}, nil
	}
	t, err, _ := h.tags.Do(key, func() (*tagged, error) { return h.fetchTag(context.WithoutCancel(ctx), req, acc, key, now) })
	if err == nil || !unreachable(err) {
		return t, err
	}
	m, cerr := h.env.Cache.GetMeta(key)
	if cerr != nil {
		return nil, err
	}
	h.env.Log.Warn("upstream failed, serving a stale manifest", "name", req.name, "tag", req.ref, "age", m.Age(now), "error", err)
	return &tagged{body: m.Body, digest: sha256Digest(m.Body), hit: true, stale: true}, nil
}

// unreachable reports whether err says the upstream could not be reached
// or answered with an error, as opposed to answering with bytes that
// failed a check.
func unreachable(err error) bool {
	var e *fetch.Error
	return errors.As(err, &e) && e.Code == fetch.UpstreamError && !fetch.Mismatch(err) && !errors.Is(err, ErrBadManifest)
}

// fetchTag fetches the manifest a tag names, checks it against the
// upstream's Docker-Content-Digest when there is one, and keeps it: under
// the tag (metadata, with a TTL) and under its digest (an artifact, for
// the request by digest that usually follows).
func (h *Handler) fetchTag(ctx context.Context, req request, acc, key string, now time.Time) (*tagged, error) {
	resp, err := h.env.Upstream.Get(ctx, h.url(req), acc)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxManifest+1))
	if err != nil {
		return nil, fetch.Errorf(http.StatusBadGateway, fetch.UpstreamError, err, "reading the upstream's manifest")
	}
	if len(b) > maxManifest {
		return nil, fmt.Errorf("%w: a manifest of more than %d bytes", verify.ErrTooLarge, maxManifest)
	}
	if err := checkSent(b, resp.Header.Get("Docker-Content-Digest")); err != nil {
		return nil, err
	}
	if _, err := parseManifest(b); err != nil {
		return nil, err
	}
	t := &tagged{body: b, digest: sha256Digest(b)}
	if err := h.env.Cache.PutMeta(key, cache.Meta{Body: b, Fetched: now}); err != nil {
		h.env.Log.Warn("caching a manifest", "name", req.name, "tag", req.ref, "error", err)
	}
	d, _ := parseDigest(t.digest)
	byDigest := request{kind: kindManifest, name: req.name, ref: t.digest}
	vr, _ := verify.NewReader(bytes.NewReader(b), int64(len(b)), true, d)
	if _, err := h.env.Cache.Put(h.url(byDigest), vr, []string{t.digest}); err != nil {
		h.env.Log.Warn("caching a manifest by digest", "name", req.name, "digest", t.digest, "error", err)
	}
	return t, nil
}

// checkSent checks a manifest against the Docker-Content-Digest the
// upstream sent with it, if it sent one. One that does not parse fails
// too: the upstream said something the mirror cannot check.
func checkSent(b []byte, sent string) error {
	if sent == "" {
		return nil
	}
	d, err := parseDigest(sent)
	if err != nil {
		return fmt.Errorf("%w: the upstream's Docker-Content-Digest: %w", verify.ErrMismatch, err)
	}
	vr, err := verify.NewReader(bytes.NewReader(b), 0, false, d)
	if err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, vr); err != nil {
		return fmt.Errorf("checking the upstream's Docker-Content-Digest: %w", err)
	}
	return nil
}

// sha256Digest is the OCI sha256 digest of b.
func sha256Digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}
