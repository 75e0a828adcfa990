package npm

import (
	"context"
	"errors"
	"net/http"
	"path"
	"time"

	policy "github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/verify"
)

// serveTarball serves the tarball file of package name after the policy,
// the registry signature and the digests all passed, and records it.
func (h *Handler) serveTarball(w http.ResponseWriter, r *http.Request, name, file string) error {
	start := time.Now()
	ctx := r.Context()
	rec := &fetch.Record{Ecosystem: Ecosystem, Name: name, Client: ctxClient(ctx)}
	err := h.tarball(ctx, w, r, name, file, rec)
	rec.Latency = time.Since(start)
	if err != nil && rec.Outcome == "" {
		rec.Outcome = fetch.UpstreamError
		var e *fetch.Error
		if errors.As(err, &e) {
			rec.Reason = e.Public
			if e.Status == http.StatusNotFound {
				rec.Outcome = "not_found"
			}
		}
	}
	h.env.Record(rec)
	return err
}

// tarball does serveTarball's work, filling rec.
func (h *Handler) tarball(ctx context.Context, w http.ResponseWriter, r *http.Request, name, file string, rec *fetch.Record) error {
	p, err := h.get(ctx, name)
	if err != nil {
		return err
	}
	v, in := p.byFile(file)
	if in == nil {
		return fetch.Errorf(http.StatusNotFound, "not_found", nil, "%s has no version with the tarball %s", name, clip(file))
	}
	rec.Version, rec.URL, rec.Registry, rec.Hash = v, event.RedactURL(in.tarball), h.upstream.String(), in.integrity
	rec.InstallScripts, rec.MetadataStale = in.scripts, p.stale
	rec.Provenance, rec.ProvenanceLost = &in.attested, p.lostProvenance(v)
	out, d := h.decide(ctx, p, v)
	rec.Verdict = string(d.Verdict)
	if d.Verdict != policy.Allow {
		rec.Reason, rec.Rule = d.Reason, d.Rule
	}
	if out != fetch.Served {
		rec.Outcome = out
		return fetch.Errorf(http.StatusForbidden, out, nil, "%s@%s is refused by the policy (%s): %s", name, v, d.Rule, d.Reason)
	}
	switch _, err := h.verifySignature(ctx, name, v, in); {
	case errors.Is(err, ErrUnsigned):
		rec.Signature = fetch.SignatureUnavailable
	case err != nil:
		rec.Outcome, rec.Reason = fetch.SignatureInvalid, err.Error()
		return fetch.Errorf(http.StatusForbidden, fetch.SignatureInvalid, err, "%s@%s: %v", name, v, err)
	default:
		rec.Signature = fetch.SignatureVerified
	}
	a, f, hit, err := h.artifact(ctx, in)
	if err != nil {
		if errors.Is(err, verify.ErrMismatch) || errors.Is(err, verify.ErrTooLarge) {
			rec.Outcome, rec.Reason = fetch.HashMismatch, err.Error()
			return fetch.Errorf(http.StatusForbidden, fetch.HashMismatch, err, "%s@%s does not match its published digests", name, v)
		}
		return err
	}
	defer f.Close()
	rec.Outcome, rec.Verified, rec.CacheHit, rec.Bytes = fetch.Served, true, hit, a.Size
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", `"`+a.SHA256+`"`)
	http.ServeContent(w, r, "", time.Time{}, f)
	return nil
}

// byFile finds the version whose tarball is file.
func (p *packument) byFile(file string) (string, *version) {
	for v, in := range p.info {
		if path.Base(in.tarball) == file {
			return v, in
		}
	}
	return "", nil
}

// digests are a version's published digests: its integrity and shasum.
func digests(in *version) ([]verify.Digest, []string, error) {
	var ds []verify.Digest
	var names []string
	if in.integrity != "" {
		sri, err := verify.SRI(in.integrity)
		if err != nil {
			return nil, nil, err
		}
		ds = append(ds, sri...)
		names = append(names, in.integrity)
	}
	if in.shasum != "" {
		d, err := verify.Hex(verify.SHA1, in.shasum)
		if err != nil {
			return nil, nil, err
		}
		ds = append(ds, d)
		names = append(names, "sha1:"+in.shasum)
	}
	if len(ds) == 0 {
		return nil, nil, errors.New("npm: the version publishes no digest")
	}
	return ds, names, nil
}

// artifact returns the verified tarball from the cache, fetching it (once
// however many ask) when the cache does not hold it under exactly these
// digests. hit says it was in the cache.
func (h *Handler) artifact(ctx context.Context, in *version) (cache.Artifact, fileReader, bool, error) {
	ds, names, err := digests(in)
	if err != nil {
		return cache.Artifact{}, nil, false, fetch.Errorf(http.StatusBadGateway, fetch.HashMismatch, err, "%v", err)
	}
	if a, f, err := h.env.Cache.Get(in.tarball); err == nil {
		if sameDigests(a.Digests, names) {
			return a, f, true, nil
		}
		f.Close()
	}
	a, err, _ := h.tarballs.Do(in.tarball, func() (cache.Artifact, error) {
		resp, err := h.env.Upstream.Get(context.WithoutCancel(ctx), in.tarball, "")
		if err != nil {
			return cache.Artifact{}, err
		}
		defer resp.Body.Close()
		vr, err := verify.NewReader(resp.Body, h.env.MaxArtifact, false, ds...)
		if err != nil {
			return cache.Artifact{}, err
		}
		return h.env.Cache.Put(in.tarball, vr, names)
	})
	if err != nil {
		return a, nil, false, err
	}
	f, err := h.env.Cache.Open(a.SHA256)
	return a, f, false, err
}

// fileReader is what artifact returns to serve from.
type fileReader interface {
	Read([]byte) (int, error)
	Seek(int64, int) (int64, error)
	Close() error
}

// sameDigests reports whether a cached artifact was verified against
// exactly the digests the metadata publishes now.
func sameDigests(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
