package oci

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/verify"
)

// Errors of the names and references in a request path.
var (
	// ErrBadName: the repository name is not one the distribution spec
	// allows.
	ErrBadName = errors.New("oci: invalid repository name")
	// ErrBadReference: the reference is neither a valid tag nor a digest.
	ErrBadReference = errors.New("oci: invalid tag or digest")
	// ErrBadDigest: the digest is malformed or of an algorithm the mirror
	// does not verify (it verifies sha256 and sha512).
	ErrBadDigest = errors.New("oci: invalid or unsupported digest")
)

// The distribution spec's grammar (distribution-spec, "Pulling manifests").
var (
	nameRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$`)
	tagRE  = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)
)

// maxName bounds a repository name, as registries do.
const maxName = 255

// The kinds of request beneath /v2/.
const (
	kindManifest = "manifests"
	kindBlob     = "blobs"
	kindTags     = "tags"
)

// request is a parsed request path: the repository, and for a manifest
// its tag or digest, for a blob its digest.
type request struct {
	kind string
	name string
	// ref is the reference as written: a tag, or a digest.
	ref string
	// digest is set when ref is a digest.
	digest *verify.Digest
}

// parsePath reads a path beneath /v2/ (escaped, without the prefix):
// "<name>/manifests/<tag|digest>", "<name>/blobs/<digest>" or
// "<name>/tags/list". It returns an *fetch.Error (400 or 404) wrapping
// ErrBadName, ErrBadReference or ErrBadDigest for anything else; the
// grammar leaves no room for "..", "." or empty segments.
func parsePath(p string) (request, error) {
	un, err := url.PathUnescape(p)
	if err != nil {
		return request{}, fetch.Errorf(http.StatusBadRequest, "bad_name", err, "bad path")
	}
	if name, ok := strings.CutSuffix(un, "/tags/list"); ok {
		return request{kind: kindTags, name: name}, checkName(name)
	}
	for _, kind := range []string{kindManifest, kindBlob} {
		i := strings.LastIndex(un, "/"+kind+"/")
		if i < 0 {
			continue
		}
		r := request{kind: kind, name: un[:i], ref: un[i+len(kind)+2:]}
		if err := checkName(r.name); err != nil {
			return request{}, err
		}
		return r, r.parseRef()
	}
	return request{}, fetch.Errorf(http.StatusNotFound, "not_found", nil, "the mirror serves manifests, blobs and tags beneath /v2/, not %s", event.Clip(un, 120))
}

// parseRef checks r.ref: a digest for a blob, a digest or a tag for a
// manifest.
func (r *request) parseRef() error {
	if r.kind == kindManifest && !strings.Contains(r.ref, ":") {
		if !tagRE.MatchString(r.ref) {
			return fetch.Errorf(http.StatusBadRequest, "bad_reference", ErrBadReference, "%q is not a valid tag", event.Clip(r.ref, 120))
		}
		return nil
	}
	d, err := parseDigest(r.ref)
	if err != nil {
		return fetch.Errorf(http.StatusBadRequest, "bad_digest", err, "%v", err)
	}
	r.digest = &d
	return nil
}

// checkName checks a repository name against the spec's grammar.
func checkName(name string) error {
	if len(name) > maxName || !nameRE.MatchString(name) {
		return fetch.Errorf(http.StatusBadRequest, "bad_name", ErrBadName, "%q is not a valid repository name", event.Clip(name, 120))
	}
	return nil
}

// parseDigest reads an OCI digest the mirror can verify: "sha256:" and 64
// lower-case hex digits, or "sha512:" and 128. Upper-case hex, which the
// spec does not allow for these algorithms, would give one artifact two
// names.
func parseDigest(s string) (verify.Digest, error) {
	alg, enc, ok := strings.Cut(s, ":")
	if !ok || strings.ToLower(enc) != enc {
		return verify.Digest{}, fmt.Errorf("%w: %q", ErrBadDigest, event.Clip(s, 120))
	}
	d, err := verify.OCI(alg + ":" + enc)
	if err != nil {
		return verify.Digest{}, fmt.Errorf("%w: %w", ErrBadDigest, err)
	}
	return d, nil
}
