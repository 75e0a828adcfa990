package npm

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/verify"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// serveTarball serves the tarball file of package name after the policy,
// the registry signature and the digests all passed, and records it.
func (h *Handler) serveTarball(w http.ResponseWriter, r *http.Request, name, file string) error {
	start := time.Now()
	ctx := r.Context()
	rec := &fetch.Record{Ecosystem: Ecosystem, Name: name, Client: ctxClient(ctx), Start: start}
	err := h.tarball(ctx, w, r, name, file, rec)
	h.env.Finish(rec, start, err)
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
		return fetch.Errorf(http.StatusNotFound, "not_found", nil, "%s has no version with the tarball %s", name, event.Clip(file, 120))
	}
	rec.Version, rec.URL, rec.Registry, rec.Hash = v, in.Tarball, h.upstream.String(), in.Integrity
	rec.InstallScripts, rec.Bundles, rec.MetadataStale = in.Scripts, in.Bundles, p.stale
	rec.Provenance, rec.ProvenanceLost = &in.Attested, p.lostProvenance(v)
	vd := h.verdicts(ctx, p).decided[v]
	out, d := vd.outcome, vd.d
	rec.Verdict = string(d.Verdict)
	if d.Verdict != policies.Allow {
		rec.Reason, rec.Rule = d.Reason, d.Rule
	}
	if out != fetch.Served {
		rec.Outcome = out
		return fetch.Errorf(http.StatusForbidden, out, nil, "%s@%s is refused by the policy (%s): %s", name, v, d.Rule, d.Reason)
	}
	facts := p.facts(v, in)
	switch _, err := h.verifySignature(ctx, name, v, in, facts.signatureMemo); {
	case errors.Is(err, ErrUnsigned):
		rec.Signature = fetch.SignatureUnavailable
	case err != nil:
		return rec.Refused(fetch.SignatureInvalid, err, "%s@%s: %v", name, v, err)
	default:
		rec.Signature = fetch.SignatureVerified
	}
	if err := facts.digestsErr; err != nil {
		return rec.Refused(fetch.HashMismatch, err, "%s@%s: %v", name, v, err)
	}
	a, f, hit, err := h.artifacts.Get(ctx, fetch.Want{URL: in.Tarball, Digests: facts.digests, Names: facts.names, Ecosystem: Ecosystem, Name: name})
	if err != nil {
		if fetch.Mismatch(err) {
			return rec.Refused(fetch.HashMismatch, err, "%s@%s does not match its published digests", name, v)
		}
		return err
	}
	defer f.Close()
	rec.ServedArtifact(a, hit)
	h.env.ServeRecorded(w, r, rec, a, f, "application/octet-stream")
	return nil
}

// byFile finds the version whose tarball is file.
func (p *packument) byFile(file string) (string, *listing.Manifest) {
	v, ok := p.files[file]
	if !ok {
		return "", nil
	}
	return v, p.Versions[v]
}

// versionFacts are what a tarball request needs of a version that its
// packument alone determines, worked out once: its published digests,
// parsed (digests), and what its signature check is remembered by.
type versionFacts struct {
	digests       []verify.Digest
	names         []string
	digestsErr    error
	signatureMemo string
}

// facts returns version v's facts (in is its manifest), remembered with
// the parsed packument.
func (p *packument) facts(v string, in *listing.Manifest) *versionFacts {
	if f, ok := p.memo.facts.Load(v); ok {
		return f.(*versionFacts)
	}
	f := &versionFacts{signatureMemo: signatureMemo(p.Name, v, in)}
	f.digests, f.names, f.digestsErr = digests(in)
	p.memo.facts.Store(v, f)
	return f
}

// digests are a version's published digests: its integrity and shasum.
func digests(in *listing.Manifest) ([]verify.Digest, []string, error) {
	var ds []verify.Digest
	var names []string
	if in.Integrity != "" {
		sri, err := verify.SRI(in.Integrity)
		if err != nil {
			return nil, nil, err
		}
		ds = append(ds, sri...)
		names = append(names, in.Integrity)
	}
	if in.Shasum != "" {
		d, err := verify.Hex(verify.SHA1, in.Shasum)
		if err != nil {
			return nil, nil, err
		}
		ds = append(ds, d)
		names = append(names, "sha1:"+in.Shasum)
	}
	if len(ds) == 0 {
		return nil, nil, errors.New("npm: the version publishes no digest")
	}
	return ds, names, nil
}
