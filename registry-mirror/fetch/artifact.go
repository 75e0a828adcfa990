package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/verify"
)

// Decide asks the policy about one version and names the decision as an
// outcome: Served unless it blocks, else Cooldown, UnknownSource or
// Blocked after the check that blocked.
func (env *Env) Decide(ctx context.Context, req policies.PackageRequest) (string, policies.Decision) {
	d := env.Policy.Package(ctx, req)
	return Outcome(d), d
}

// Outcome names a policy decision as an outcome.
func Outcome(d policies.Decision) string {
	if d.Verdict != policies.Block {
		return Served
	}
	for _, c := range d.Checks {
		if c.Verdict != policies.Block {
			continue
		}
		switch c.Name {
		case policies.CheckCooldown:
			return Cooldown
		case policies.CheckSource:
			return UnknownSource
		}
		return Blocked
	}
	return Blocked
}

// Artifacts fetches artifacts through the cache: each is verified as it
// streams from the upstream and stored only when it matched, and fetched
// once however many clients ask for it at the same time.
type Artifacts struct {
	env   *Env
	group cache.Group[cache.Artifact]
}

// NewArtifacts returns the artifact fetcher of env.
func NewArtifacts(env *Env) *Artifacts { return &Artifacts{env: env} }

// Want is what an artifact must be: its upstream URL, its size when the
// metadata gives it (0: unknown, bounded by Env.MaxArtifact), and the
// publisher's digests, parsed (Digests) and as written (Names, what the
// cache remembers it was verified against).
type Want struct {
	URL     string
	Size    int64
	Digests []verify.Digest
	Names   []string
	// Accept is sent upstream, for registries that negotiate (OCI).
	Accept string
	// Max bounds an artifact whose Size is unknown (0: Env.MaxArtifact),
	// for artifacts with a tighter bound of their own (OCI manifests).
	Max int64
	// Ecosystem and Name say whose artifact it is: a redirect to another
	// host is followed only to a source the policy approves for it
	// (approveRedirects); without them, only to URL's own host.
	Ecosystem, Name string
}

// Get returns the artifact w names and its bytes, open for reading
// (cache.OpenBody: a small artifact's from memory, a larger one's file).
// hit says it came from the cache, where it was stored after it had been
// verified against exactly these digests; a cache hit passes the size
// checks a fetch would too. An error that wraps verify.ErrMismatch,
// ErrTooLarge or ErrSize means the upstream's bytes did not match.
//
// The digests are checked as the bytes enter the cache, not each time they
// are served: the cache's files are root's (0600, in directories of mode
// 0700), out of the agent's reach, and a blob whose file is no longer the
// one the cache committed (another inode, size or modification time), or
// whose bytes, read into memory, do not hash to its name, is fetched and
// verified again (cache.ErrChanged). `sandtrail mirror verify-cache`
// re-hashes every blob.
func (a *Artifacts) Get(ctx context.Context, w Want) (cache.Artifact, *cache.Body, bool, error) {
	if art, f, ok, err := a.cached(w); err != nil || ok {
		return art, f, ok, err
	}
	art, err, _ := a.group.Do(w.URL, func() (cache.Artifact, error) {
		// A fill that finished between the check above and this call
		// stored it already.
		if art, f, ok, err := a.cached(w); err != nil || ok {
			if f != nil {
				f.Close()
			}
			return art, err
		}
		uctx := withRedirects(context.WithoutCancel(ctx), a.env.approveRedirects(ctx, w))
		resp, err := a.env.Upstream.Get(uctx, w.URL, w.Accept)
		if err != nil {
			return cache.Artifact{}, err
		}
		defer resp.Body.Close()
		max, exact := a.bound(w)
		vr, err := verify.NewReader(resp.Body, max, exact, w.Digests...)
		if err != nil {
			return cache.Artifact{}, err
		}
		// The URL the bytes came from, when a redirect led elsewhere.
		source := ""
		if asked, err := url.Parse(w.URL); err == nil && resp.Request.URL.String() != asked.String() {
			source = resp.Request.URL.String()
		}
		return a.env.Cache.PutFrom(w.URL, source, vr, w.Names)
	})
	if err != nil {
		return art, nil, false, err
	}
	f, err := a.env.Cache.OpenBody(art.SHA256)
	return art, f, false, err
}

// bound is how many bytes w's artifact may have: exactly its Size when
// the metadata gives it, else at most Max or Env.MaxArtifact.
func (a *Artifacts) bound(w Want) (max int64, exact bool) {
	switch {
	case w.Size > 0:
		return w.Size, true
	case w.Max > 0:
		return w.Max, false
	}
	return a.env.MaxArtifact, false
}

// cached returns the artifact from the cache when it was verified against
// exactly w's digests, checked as a fetch would check it: an artifact of
// another size than w gives is an ErrSize, one past w's bound an
// ErrTooLarge (a size the metadata gives can change while the digest
// stays: an OCI blob first fetched with no manifest naming it). A blob
// that is gone, or changed since it was stored (OpenBody), is a miss,
// fetched again.
func (a *Artifacts) cached(w Want) (cache.Artifact, *cache.Body, bool, error) {
	art, err := a.env.Cache.Lookup(w.URL)
	if err != nil || !slices.Equal(art.Digests, w.Names) {
		return art, nil, false, nil
	}
	switch max, exact := a.bound(w); {
	case exact && art.Size != max:
		return art, nil, false, fmt.Errorf("%w: the cached artifact has %d bytes, its metadata gives %d", verify.ErrSize, art.Size, max)
	case art.Size > max:
		return art, nil, false, fmt.Errorf("%w: the cached artifact has %d bytes, more than %d", verify.ErrTooLarge, art.Size, max)
	}
	f, err := a.env.Cache.OpenBody(art.SHA256)
	if err != nil {
		if errors.Is(err, cache.ErrChanged) {
			a.env.Log.Warn("a cached artifact changed since it was verified; fetching it again", "url", event.RedactURL(w.URL), "sha256", art.SHA256)
		}
		return art, nil, false, nil
	}
	return art, f, true, nil
}

// Serve writes an artifact's bytes, with its sha256 as the ETag: from
// memory, or from its file with sendfile (http.ServeContent of an
// *os.File onto the connection, w being the server's own writer).
func Serve(w http.ResponseWriter, r *http.Request, art cache.Artifact, body *cache.Body, contentType string) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("ETag", `"`+art.SHA256+`"`)
	switch {
	case body.File() != nil:
		http.ServeContent(w, r, "", time.Time{}, body.File())
	case plain(r):
		// From memory, whole: what ServeContent would do, with less work.
		w.Header().Set("Content-Length", strconv.FormatInt(body.Size(), 10))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			io.Copy(w, body)
		}
	default:
		http.ServeContent(w, r, "", time.Time{}, body)
	}
}

// plain reports whether r asks for a whole artifact, unconditionally.
func plain(r *http.Request) bool {
	h := r.Header
	return h.Get("Range") == "" && h.Get("If-Match") == "" && h.Get("If-None-Match") == "" && h.Get("If-Range") == ""
}

// Mismatch reports whether err says the upstream's bytes did not match.
func Mismatch(err error) bool {
	return errors.Is(err, verify.ErrMismatch) || errors.Is(err, verify.ErrTooLarge) || errors.Is(err, verify.ErrSize)
}
