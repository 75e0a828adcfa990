package oci

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
)

// WriteError writes err to w in the distribution spec's error form,
// {"errors":[{"code": …, "message": …, "detail": …}]}, which OCI clients
// (skopeo, containerd, go-containerregistry) read and show: the code is
// the spec's for the kind of failure, the message the mirror's (its own
// code and public message), the detail its own code alone. It returns the
// *fetch.Error it wrote.
func (h *Handler) WriteError(w http.ResponseWriter, r *http.Request, err error) *fetch.Error {
	e := fetch.AsError(err)
	type specError struct {
		Code    string            `json:"code"`
		Message string            `json:"message"`
		Detail  map[string]string `json:"detail,omitempty"`
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(struct {
		Errors []specError `json:"errors"`
	}{[]specError{{Code: specCode(e, r.URL.Path), Message: e.Message(), Detail: map[string]string{"sandtrail_code": e.Code}}}})
	return e
}

// specCode is the distribution spec's error code for e: DENIED for a
// refusal (the policy, a mismatch, an unapproved redirect), the *_INVALID
// codes for a request the grammar refuses, *_UNKNOWN for what the upstream
// does not have (the manifest, the blob, or the repository of the request
// path p), UNSUPPORTED for a method the mirror does not serve, and UNKNOWN
// (as registries answer a failure of their own) for the rest.
func specCode(e *fetch.Error, p string) string {
	switch {
	case e.Status == http.StatusForbidden:
		return "DENIED"
	case e.Code == "bad_name", e.Code == "bad_reference":
		return "NAME_INVALID"
	case e.Code == "bad_digest":
		return "DIGEST_INVALID"
	case e.Status == http.StatusMethodNotAllowed:
		return "UNSUPPORTED"
	case e.Status == http.StatusNotFound && strings.Contains(p, "/"+kindManifest+"/"):
		return "MANIFEST_UNKNOWN"
	case e.Status == http.StatusNotFound && strings.Contains(p, "/"+kindBlob+"/"):
		return "BLOB_UNKNOWN"
	case e.Status == http.StatusNotFound:
		return "NAME_UNKNOWN"
	}
	return "UNKNOWN"
}
