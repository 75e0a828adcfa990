package deb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
)

// signed is a Release as the upstream served it: an InRelease, or a
// Release with its Release.gpg.
type signed struct {
	InRelease []byte `json:"inrelease,omitempty"`
	Release   []byte `json:"release,omitempty"`
	Signature []byte `json:"signature,omitempty"`
}

// release is a verified Release of one suite.
type release struct {
	*releaseInfo
	signed  signed
	fetched time.Time
	// stale: the upstream could not be reached and this came from the
	// cache (verified again, Valid-Until included).
	stale bool
}

// verify checks s, the Release of suite, and reads it: a good signature
// by a key of the archive's keyring, the suite's own Release, and not
// past its Valid-Until. The error wraps ErrSignature, ErrSyntax, ErrSuite
// or ErrExpired.
func (a *archive) verify(s signed, suite string, now time.Time) (*releaseInfo, error) {
	if a.keyErr != nil {
		return nil, fmt.Errorf("%w: the archive's keyring could not be read: %v", ErrSignature, a.keyErr)
	}
	text := s.Release
	if s.InRelease != nil {
		var err error
		if text, err = openInRelease(a.keys, s.InRelease, now); err != nil {
			return nil, err
		}
	} else if err := checkDetached(a.keys, s.Release, s.Signature, now); err != nil {
		return nil, err
	}
	ri, err := parseRelease(text)
	if err != nil {
		return nil, err
	}
	if ri.suite != suite && ri.codename != suite {
		return nil, fmt.Errorf("%w: dists/%s/ holds the Release of suite %q (codename %q)", ErrSuite, suite, event.Clip(ri.suite, 80), event.Clip(ri.codename, 80))
	}
	if !ri.validUntil.IsZero() && now.After(ri.validUntil) {
		return nil, fmt.Errorf("%w: it was valid until %s", ErrExpired, ri.validUntil.UTC().Format(time.RFC3339))
	}
	return ri, nil
}

// refused reports whether err is a failed check of the chain of trust
// (as opposed to an upstream that failed).
func refused(err error) bool {
	return errors.Is(err, ErrSignature) || errors.Is(err, ErrSyntax) || errors.Is(err, ErrSuite) || errors.Is(err, ErrExpired)
}

// release returns the verified Release of suite, preferring InRelease and
// falling back to Release and Release.gpg where there is none: from
// memory or the cache while it is fresh, else from the upstream (one
// fetch however many ask), else, when the upstream cannot be reached,
// stale from the cache, verified again.
func (h *Handler) release(ctx context.Context, a *archive, suite string) (*release, error) {
	rel, err := h.signedRelease(ctx, a, suite, false)
	if isNotFound(err) {
		return h.signedRelease(ctx, a, suite, true)
	}
	return rel, err
}

// signedRelease returns suite's Release in one form: InRelease, or
// (detached) Release with Release.gpg.
func (h *Handler) signedRelease(ctx context.Context, a *archive, suite string, detached bool) (*release, error) {
	now := h.env.Now()
	key := fmt.Sprintf("deb:release:%t:%sdists/%s/", detached, a.base, suite)
	h.mu.Lock()
	rel := h.suites[key]
	h.mu.Unlock()
	if rel != nil && !rel.stale && now.Sub(rel.fetched) < h.env.MetaTTL && (rel.validUntil.IsZero() || now.Before(rel.validUntil)) {
		return rel, nil
	}
	fresh := func() *release {
		if m, err := h.env.Cache.GetMeta(key); err == nil && m.Age(now) < h.env.MetaTTL {
			if rel, err := h.fromMeta(a, suite, m, now); err == nil {
				return rel
			}
		}
		return nil
	}
	if rel := fresh(); rel != nil {
		return h.remember(key, rel), nil
	}
	rel, err, _ := h.releases.Do(key, func() (*release, error) {
		if rel := fresh(); rel != nil { // a fetch that just ended stored it
			return rel, nil
		}
		s, err := h.fetchSigned(context.WithoutCancel(ctx), a, suite, detached)
		if err != nil {
			return nil, err
		}
		ri, err := a.verify(s, suite, now)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(s)
		if err := h.env.Cache.PutMeta(key, cache.Meta{Body: b, Fetched: now}); err != nil {
			h.env.Log.Warn("caching a release", "key", key, "error", err)
		}
		return &release{releaseInfo: ri, signed: s, fetched: now}, nil
	})
	if err == nil {
		return h.remember(key, rel), nil
	}
	if refused(err) || isNotFound(err) {
		return nil, err
	}
	return h.stale(a, suite, key, now, err)
}

// stale serves the cached Release when the upstream failed with err.
func (h *Handler) stale(a *archive, suite, key string, now time.Time, err error) (*release, error) {
	m, cerr := h.env.Cache.GetMeta(key)
	if cerr != nil {
		return nil, err
	}
	rel, verr := h.fromMeta(a, suite, m, now)
	if verr != nil {
		return nil, verr
	}
	h.env.Log.Warn("upstream failed, serving a stale release", "archive", a.name, "suite", suite, "age", m.Age(now), "error", err)
	rel.stale = true
	return h.remember(key, rel), nil
}

// fromMeta verifies a cached Release again.
func (h *Handler) fromMeta(a *archive, suite string, m cache.Meta, now time.Time) (*release, error) {
	var s signed
	if err := json.Unmarshal(m.Body, &s); err != nil {
		return nil, fmt.Errorf("reading a cached release: %w", err)
	}
	ri, err := a.verify(s, suite, now)
	if err != nil {
		return nil, err
	}
	return &release{releaseInfo: ri, signed: s, fetched: m.Fetched}, nil
}

// fetchSigned fetches suite's InRelease, or its Release and Release.gpg.
func (h *Handler) fetchSigned(ctx context.Context, a *archive, suite string, detached bool) (signed, error) {
	dir := "dists/" + suite + "/"
	if !detached {
		b, _, err := h.env.Upstream.GetMeta(ctx, a.fileURL(dir+"InRelease"), "")
		return signed{InRelease: nonNil(b)}, err
	}
	rel, _, err := h.env.Upstream.GetMeta(ctx, a.fileURL(dir+"Release"), "")
	if err != nil {
		return signed{}, err
	}
	sig, _, err := h.env.Upstream.GetMeta(ctx, a.fileURL(dir+"Release.gpg"), "")
	return signed{Release: nonNil(rel), Signature: sig}, err
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// remember keeps rel in memory, dropping another entry past maxSuites.
func (h *Handler) remember(key string, rel *release) *release {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.suites[key]; !ok && len(h.suites) >= maxSuites {
		for k := range h.suites {
			delete(h.suites, k)
			break
		}
	}
	h.suites[key] = rel
	return rel
}

// serveRelease serves InRelease, Release or Release.gpg of suite, once
// verified. A refusal is recorded.
func (h *Handler) serveRelease(w http.ResponseWriter, r *http.Request, a *archive, suite, file string) error {
	rel, err := h.signedRelease(r.Context(), a, suite, file != "InRelease")
	if err != nil {
		return h.refuseIndex(r, a, "dists/"+suite+"/"+file, err)
	}
	body := rel.signed.InRelease
	switch file {
	case "Release":
		body = rel.signed.Release
	case "Release.gpg":
		body = rel.signed.Signature
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if rel.stale {
		w.Header().Set("Warning", `110 sandtrail "stale: the upstream archive could not be reached"`)
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	return nil
}

// isNotFound reports an upstream 404.
func isNotFound(err error) bool {
	var e *fetch.Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}
