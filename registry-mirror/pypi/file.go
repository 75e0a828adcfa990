package pypi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/verify"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// metadataExt ends a PEP 658 core metadata file's name.
const metadataExt = ".metadata"

// serveFile serves filename of project name, or its core metadata file,
// after the policy and the sha256 both passed, and records it.
func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request, name, filename string) error {
	start := time.Now()
	ctx := r.Context()
	rec := &fetch.Record{Ecosystem: Ecosystem, Name: name, Client: fetch.ClientOf(ctx), Start: start}
	base, isMeta := strings.CutSuffix(filename, metadataExt)
	var err error
	if isMeta {
		err = h.metadata(ctx, w, r, name, base, rec)
	} else {
		err = h.file(ctx, w, r, name, filename, rec)
	}
	if !isMeta || err != nil {
		h.env.Finish(rec, start, err)
	}
	return err
}

// lookup finds filename on project name's page and checks it with the
// policy, filling rec.
func (h *Handler) lookup(ctx context.Context, name, filename string, rec *fetch.Record) (*listing.ProjectFile, error) {
	doc, err := h.project(ctx, name)
	if err != nil {
		return nil, err
	}
	f := doc.Value.ByName[filename]
	if f == nil {
		return nil, fetch.Errorf(http.StatusNotFound, "not_found", nil, "%s has no file %.120q", name, filename)
	}
	rec.Version, rec.URL, rec.Registry, rec.MetadataStale = f.Version, f.URL, h.upstream.String(), doc.Stale
	if f.SHA256 != "" {
		rec.Hash = verify.SHA256 + ":" + f.SHA256
	}
	out, d := h.decide(ctx, name, f)
	rec.Verdict = string(d.Verdict)
	if d.Verdict != policies.Allow {
		rec.Reason, rec.Rule = d.Reason, d.Rule
	}
	if out != fetch.Served {
		rec.Outcome = out
		return nil, fetch.Errorf(http.StatusForbidden, out, nil, "%s %s (%s) is refused by the policy (%s): %s", name, f.Version, filename, d.Rule, d.Reason)
	}
	return f, nil
}

// file serves one distribution file, verified against its sha256.
func (h *Handler) file(ctx context.Context, w http.ResponseWriter, r *http.Request, name, filename string, rec *fetch.Record) error {
	f, err := h.lookup(ctx, name, filename, rec)
	if err != nil {
		return err
	}
	return h.serveVerified(w, r, rec, f.URL, f.Size, f.SHA256, true)
}

// metadata serves the core metadata file of filename, verified against
// the sha256 its page gives; a file without one has none to serve.
func (h *Handler) metadata(ctx context.Context, w http.ResponseWriter, r *http.Request, name, filename string, rec *fetch.Record) error {
	f, err := h.lookup(ctx, name, filename, rec)
	if err != nil {
		return err
	}
	if f.MetaSHA256 == "" {
		return fetch.Errorf(http.StatusNotFound, "not_found", nil, "%s has no core metadata with a sha256", filename)
	}
	u, err := url.Parse(f.URL)
	if err != nil {
		return fetch.Errorf(http.StatusBadGateway, fetch.UpstreamError, err, "bad upstream URL")
	}
	u.Path += metadataExt
	u.RawPath = ""
	rec.URL, rec.Hash = u.String(), verify.SHA256+":"+f.MetaSHA256
	return h.serveVerified(w, r, rec, u.String(), 0, f.MetaSHA256, false)
}

// errNoSHA256 is the refusal of a file whose index entry gives no sha256:
// the mirror has nothing to check its bytes against.
var errNoSHA256 = errors.New("the index gives no sha256 for the file")

// serveVerified fetches rawURL through the cache, checked against its
// sha256 (and size, when known), and serves it, recorded first when
// record (a distribution file; a metadata file served is not recorded).
func (h *Handler) serveVerified(w http.ResponseWriter, r *http.Request, rec *fetch.Record, rawURL string, size int64, sha256 string, record bool) error {
	if sha256 == "" {
		return rec.Refused(fetch.HashMismatch, errNoSHA256, "%s %s: %v", rec.Name, rec.Version, errNoSHA256)
	}
	d, err := verify.Hex(verify.SHA256, sha256)
	if err != nil {
		return rec.Refused(fetch.HashMismatch, err, "%s %s: %v", rec.Name, rec.Version, err)
	}
	a, fh, hit, err := h.artifacts.Get(r.Context(), fetch.Want{URL: rawURL, Size: size, Digests: []verify.Digest{d}, Names: []string{d.String()},
		Ecosystem: Ecosystem, Name: rec.Name})
	if err != nil {
		if fetch.Mismatch(err) {
			return rec.Refused(fetch.HashMismatch, err, "%s %s does not match the sha256 of the index", rec.Name, rec.Version)
		}
		return err
	}
	defer fh.Close()
	rec.ServedArtifact(a, hit)
	if record {
		h.env.ServeRecorded(w, r, rec, a, fh, "application/octet-stream")
	} else {
		fetch.Serve(w, r, a, fh, "application/octet-stream")
	}
	return nil
}
