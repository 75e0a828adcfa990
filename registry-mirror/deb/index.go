package deb

import (
	"encoding/hex"
	"errors"
	"net/http"
	"path"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/verify"
)

// serveIndex serves file, beneath dists/<suite>/, when the suite's
// verified Release lists it and its bytes match. A refusal is recorded.
func (h *Handler) serveIndex(w http.ResponseWriter, r *http.Request, a *archive, suite, file string) error {
	ctx := r.Context()
	rel, err := h.release(ctx, a, suite)
	if err != nil {
		return h.refuseIndex(r, a, "dists/"+suite+"/"+file, err)
	}
	name, s, ok := rel.lookup(file)
	p := "dists/" + suite + "/" + file
	if !ok {
		return h.refuseIndex(r, a, p, errUnlisted)
	}
	want := wantOf(a.fileURL(p), s)
	art, f, _, err := h.artifacts.Get(ctx, want)
	if err != nil {
		if fetch.Mismatch(err) {
			return h.refuseIndex(r, a, p, err)
		}
		return err
	}
	defer f.Close()
	if comp, ok := packagesFile(name); ok {
		h.pool.learn(a, known{URL: want.URL, SHA256: s.hex(), Size: s.size, Comp: comp})
	}
	fetch.Serve(w, r, art, f, contentType(name))
	return nil
}

// errUnlisted: the file is not in the verified Release's SHA256 list.
var errUnlisted = errors.New("deb: the file is not listed in the suite's verified Release")

// lookup finds file (a path beneath dists/<suite>/, or a by-hash path
// "<dir>/by-hash/SHA256/<hex>") in the Release: the name of the file the
// Release lists, and its sum.
func (rel *release) lookup(file string) (string, sum, bool) {
	if s, ok := rel.files[file]; ok {
		return file, s, true
	}
	dir, hx, ok := strings.Cut(file, "/by-hash/SHA256/")
	if !ok || strings.Contains(hx, "/") {
		return "", sum{}, false
	}
	b, err := hex.DecodeString(hx)
	if err != nil || len(b) != 32 {
		return "", sum{}, false
	}
	var key [32]byte
	copy(key[:], b)
	var found string
	for _, name := range rel.byHash[key] {
		if path.Dir(name) != dir {
			continue
		}
		if _, isPkgs := packagesFile(name); found == "" || isPkgs {
			found = name // prefer a Packages file, to index it
		}
	}
	if found == "" {
		return "", sum{}, false
	}
	return found, rel.files[found], true
}

// wantOf is the artifact fetch of a file with sum s.
func wantOf(u string, s sum) fetch.Want {
	return fetch.Want{URL: u, Size: s.size, Digests: []verify.Digest{{Alg: verify.SHA256, Sum: s.sha256[:]}},
		Names: []string{"sha256:" + s.hex()}}
}

// packagesFile reports whether name is a binary Packages file
// (<component>/binary-<arch>/Packages[.gz|.xz|.bz2], or the
// debian-installer's), and its compression.
func packagesFile(name string) (string, bool) {
	dir, base := path.Split(name)
	if !strings.HasPrefix(path.Base(dir), "binary-") {
		return "", false
	}
	for _, c := range []string{"", ".gz", ".xz", ".bz2"} {
		if base == "Packages"+c {
			return c, true
		}
	}
	return "", false
}

// contentType is the media type of an index file.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".gz":
		return "application/gzip"
	case ".xz":
		return "application/x-xz"
	case ".bz2":
		return "application/x-bzip2"
	}
	return "application/octet-stream"
}

// refuseIndex records a refused index file and returns its error: a
// failed check is a 403 (signature_invalid, hash_mismatch, or blocked for
// a file the Release does not list); anything else (the upstream failed)
// passes through unrecorded.
func (h *Handler) refuseIndex(r *http.Request, a *archive, p string, err error) error {
	var out, rule string
	switch {
	case refused(err):
		out, rule = fetch.SignatureInvalid, "deb.release"
	case fetch.Mismatch(err):
		out, rule = fetch.HashMismatch, "deb.release"
	case errors.Is(err, errUnlisted):
		out, rule = fetch.Blocked, "deb.release"
	default:
		return err
	}
	h.env.Record(&fetch.Record{Ecosystem: Ecosystem, URL: a.fileURL(p), Registry: a.base.String(), Outcome: out,
		Verdict: "block", Reason: err.Error(), Rule: rule, Client: fetch.ClientOf(r.Context())})
	return fetch.Errorf(http.StatusForbidden, out, err, "%s of archive %s: %v", event.Clip(p, 80), a.name, err)
}
