// Package fetch is what the mirror's ecosystems share while they serve one
// request: who the client is (Client, attributed by the mirror), the record
// of each artifact served or refused (Record, converted to a pkg.fetch
// event in one place), the typed error an ecosystem handler returns
// (Error: what the client is told, and what is logged), and the bounded
// upstream client (Upstream).
package fetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
)

// Client is who asked, as the mirror saw it: the peer's address and port,
// and its session when the peer's socket is in a session's cgroup on this
// host (found by sock_diag, not claimed).
type Client struct {
	Addr      netip.AddrPort
	SessionID string
	// Proc is the process that made the client's connection, as the
	// kernel recorded its connect (nil when unknown).
	Proc *event.Proc
	// Unshimmed is set when Proc is an agent's process with no live shim
	// among its ancestors: a package manager run around its shim.
	Unshimmed bool
}

type clientKey struct{}

// WithClient returns ctx carrying c.
func WithClient(ctx context.Context, c Client) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

// ClientOf returns the client ctx carries.
func ClientOf(ctx context.Context) Client {
	c, _ := ctx.Value(clientKey{}).(Client)
	return c
}

// The outcomes of an artifact request: a pkg.fetch's verdict.
const (
	Served           = "served"
	Blocked          = "blocked"
	Cooldown         = "cooldown"
	HashMismatch     = "hash_mismatch"
	SignatureInvalid = "signature_invalid"
	UnknownSource    = "unknown_source"
	UpstreamError    = "upstream_error"
)

// The states of a registry signature check, where the ecosystem has
// signatures.
const (
	SignatureVerified    = "verified"
	SignatureUnavailable = "unavailable"
)

// Error is a failed request: Status and Code (one of the outcomes, or
// another short word) and Public go to the client; Err is logged. A
// refusal (policy or verification) is a 403, which clients do not retry;
// an upstream failure a 502, which they may.
type Error struct {
	Status int
	Code   string
	Public string
	Err    error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Code + ": " + e.Public + ": " + e.Err.Error()
	}
	return e.Code + ": " + e.Public
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an Error with a formatted public message.
func Errorf(status int, code string, err error, format string, a ...any) *Error {
	return &Error{Status: status, Code: code, Public: fmt.Sprintf(format, a...), Err: err}
}

// AsError is err as an *Error: itself, or a 500 that tells the client
// nothing more.
func AsError(err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError, Code: "internal", Public: "internal error", Err: err}
	}
	return e
}

// Message is what the client is told of e: the mirror, its code and its
// public message.
func (e *Error) Message() string { return "sandtrail mirror: " + e.Code + ": " + e.Public }

// Write writes err to w (AsError) in npm's JSON error form, which npm
// prints and cargo shows as the body of a failed download: its status,
// {"error": Message, "code": Code}. It returns the *Error it wrote.
func Write(w http.ResponseWriter, err error) *Error {
	e := AsError(err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}{e.Message(), e.Code})
	return e
}

// Upstream fetches from upstream registries with bounded time and size.
type Upstream struct {
	HTTP *http.Client
	// MaxMeta bounds a metadata document (a 16 MiB packument is real).
	MaxMeta int64
	// UserAgent is sent upstream.
	UserAgent string
}

// Get fetches url. A response that is not 200 is an *Error (404 passes
// through as not_found, anything else as upstream_error; a redirect that
// the approval ctx carries refused, an unknown_source 403); the caller
// closes the body of a 200.
func (u *Upstream) Get(ctx context.Context, url, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, Errorf(http.StatusBadGateway, UpstreamError, err, "bad upstream URL")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if u.UserAgent != "" {
		req.Header.Set("User-Agent", u.UserAgent)
	}
	c := *u.HTTP
	c.CheckRedirect = checkRedirect(u.HTTP.CheckRedirect)
	resp, err := c.Do(req)
	if re := (*RedirectError)(nil); errors.As(err, &re) {
		return nil, Errorf(http.StatusForbidden, UnknownSource, err, "the upstream redirected to %.120s, which is not an approved source", re.Target.Host)
	}
	if err != nil {
		return nil, Errorf(http.StatusBadGateway, UpstreamError, err, "the upstream registry did not answer")
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, Errorf(http.StatusNotFound, "not_found", nil, "not found upstream")
	}
	return nil, Errorf(http.StatusBadGateway, UpstreamError, fmt.Errorf("status %s", resp.Status), "the upstream registry answered %d", resp.StatusCode)
}

// GetMeta fetches a metadata document whole, refusing one larger than
// MaxMeta.
func (u *Upstream) GetMeta(ctx context.Context, url, accept string) ([]byte, string, error) {
	resp, err := u.Get(ctx, url, accept)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, u.MaxMeta+1))
	if err != nil {
		return nil, "", Errorf(http.StatusBadGateway, UpstreamError, err, "reading the upstream's answer")
	}
	if int64(len(b)) > u.MaxMeta {
		return nil, "", Errorf(http.StatusBadGateway, UpstreamError, nil, "the upstream's metadata is larger than %d bytes", u.MaxMeta)
	}
	return b, resp.Header.Get("Content-Type"), nil
}

// Record is what the mirror knows of one artifact it served or refused.
type Record struct {
	Ecosystem string
	Name      string
	Version   string
	// Purl is the package URL, set by an ecosystem that knows more of the
	// package than its name and version (a deb's architecture, from
	// resolver/purl's Deb); empty: purl.Of of the three.
	Purl string
	// URL is the artifact's upstream URL; Registry the upstream registry.
	URL      string
	Registry string
	// Hash is the artifact's digest as its ecosystem writes it.
	Hash string
	// Verified: the bytes served matched the publisher's digests, and the
	// signature chain where the ecosystem has one and it was available.
	Verified bool
	// Signature is SignatureVerified or SignatureUnavailable where the
	// ecosystem has registry signatures.
	Signature string
	// Outcome is one of the outcome constants; Verdict is the policy's
	// (allow, flag, block); Reason and Rule say why for a flag or a
	// refusal.
	Outcome string
	Verdict string
	Reason  string
	Rule    string
	Client  Client
	Bytes   int64
	// CacheHit: served from the cache, not fetched now.
	CacheHit bool
	// Start is when the request began: ServeRecorded measures Latency
	// from it.
	Start   time.Time
	Latency time.Duration
	// recorded: ServeRecorded recorded it, and Finish records nothing more.
	recorded bool
	// MetadataStale: the metadata came from the cache, the upstream down.
	MetadataStale bool
	// Provenance is set where the ecosystem has attestations: whether this
	// version has them. ProvenanceLost: earlier versions had them.
	Provenance     *bool
	ProvenanceLost bool
	// InstallScripts names what runs package code at install time
	// (npm's preinstall, install, postinstall; binding.gyp).
	InstallScripts []string
	// Bundles are the names of the packages an npm tarball carries, as
	// its version's metadata declares them (bundleDependencies), the
	// metadata whose digests the tarball's bytes were checked against.
	Bundles []string
}

// ServedArtifact fills r for artifact a, served verified (from the cache
// when hit): its URL becomes the one the bytes came from when the
// upstream redirected the mirror elsewhere.
func (r *Record) ServedArtifact(a cache.Artifact, hit bool) {
	r.Outcome, r.Verified, r.CacheHit, r.Bytes = Served, true, hit, a.Size
	if a.Source != "" {
		r.URL = a.Source
	}
}

// Refused sets r's outcome to a failed check's (HashMismatch,
// SignatureInvalid), with err as the reason, and returns the client's 403
// with format's message.
func (r *Record) Refused(outcome string, err error, format string, a ...any) *Error {
	r.Outcome, r.Reason = outcome, err.Error()
	return Errorf(http.StatusForbidden, outcome, err, format, a...)
}

// Failed sets the outcome of a request that failed with err before a
// check set one: a block by RuleRedirect (unknown_source) for a redirect
// the mirror refused to follow, not_found for an upstream 404, upstream_error for
// anything else, with the client's message as the reason and no rule (the
// policy's rule and reason for the version do not say why it failed). It does
// nothing when err is nil or the outcome is set.
func (r *Record) Failed(err error) {
	if err == nil || r.Outcome != "" {
		return
	}
	if re := (*RedirectError)(nil); errors.As(err, &re) {
		r.Outcome, r.Verdict, r.Rule, r.Reason, r.Verified = UnknownSource, "block", RuleRedirect, re.Error(), false
		return
	}
	r.Outcome, r.Rule, r.Reason = UpstreamError, "", ""
	var e *Error
	if errors.As(err, &e) {
		r.Reason = e.Public
		if e.Status == http.StatusNotFound {
			r.Outcome = NotFound
		}
	}
}

// Filtered records metadata that the policy changed for a client: the
// versions it removed, and why.
type Filtered struct {
	Ecosystem string
	Name      string
	Registry  string
	Client    Client
	Removed   []Removal
}

// Removal is one version the policy removed.
type Removal struct {
	Version string `json:"version"`
	Outcome string `json:"verdict"`
	Rule    string `json:"rule,omitempty"`
	Reason  string `json:"reason,omitempty"`
}
