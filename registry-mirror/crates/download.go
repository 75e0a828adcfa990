package crates

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/verify"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// serveCrate serves version of crate name after the policy and its cksum
// passed, and records it, served or refused.
func (h *Handler) serveCrate(w http.ResponseWriter, r *http.Request, name, version string) error {
	start := time.Now()
	rec := &fetch.Record{Ecosystem: Ecosystem, Name: name, Version: version, Registry: h.upstream.String(),
		Client: fetch.ClientOf(r.Context()), Start: start}
	err := h.crate(r.Context(), w, r, name, version, rec)
	h.env.Finish(rec, start, err)
	return err
}

// crate does serveCrate's work, filling rec.
func (h *Handler) crate(ctx context.Context, w http.ResponseWriter, r *http.Request, name, version string, rec *fetch.Record) error {
	idx, err := h.get(ctx, strings.ToLower(name))
	if err != nil {
		return err
	}
	l, err := idx.version(name, version)
	if err != nil {
		return err
	}
	cfg, stale, err := h.config(ctx)
	if err != nil {
		return err
	}
	up := listing.CrateDownloadURL(cfg.DL, l.Name, l.Vers, l.Cksum)
	rec.Name, rec.URL, rec.Hash, rec.MetadataStale = l.Name, up, "sha256:"+l.Cksum, idx.stale || stale
	out, d := h.decide(ctx, cfg, l)
	rec.Verdict = string(d.Verdict)
	if d.Verdict != policies.Allow {
		rec.Reason, rec.Rule = d.Reason, d.Rule
	}
	if out != fetch.Served {
		rec.Outcome = out
		return fetch.Errorf(http.StatusForbidden, out, nil, "%s@%s is refused by the policy (%s): %s", l.Name, l.Vers, d.Rule, d.Reason)
	}
	sum, err := verify.Hex(verify.SHA256, l.Cksum)
	if err != nil {
		return fetch.Errorf(http.StatusBadGateway, fetch.UpstreamError, err, "the cksum of %s@%s", l.Name, l.Vers)
	}
	a, f, hit, err := h.artifacts.Get(ctx, fetch.Want{URL: up, Digests: []verify.Digest{sum}, Names: []string{"sha256:" + l.Cksum},
		Ecosystem: Ecosystem, Name: l.Name})
	if err != nil {
		if fetch.Mismatch(err) {
			return rec.Refused(fetch.HashMismatch, err, "%s@%s does not match the cksum of its index line", l.Name, l.Vers)
		}
		return err
	}
	defer f.Close()
	rec.ServedArtifact(a, hit)
	h.env.ServeRecorded(w, r, rec, a, f, "application/gzip")
	return nil
}
