package release

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// MaxBody caps a registry response. The largest npm packuments are a few
// tens of megabytes.
const MaxBody = 128 << 20

// Fetcher reads package metadata from registries over HTTP.
type Fetcher struct {
	client *http.Client
	log    hclog.Logger
}

// Option configures a Fetcher.
type Option func(*Fetcher)

// WithClient sets the HTTP client; the default has a one-minute timeout.
func WithClient(c *http.Client) Option { return func(f *Fetcher) { f.client = c } }

// WithLogger sets the logger; the default discards.
func WithLogger(l hclog.Logger) Option { return func(f *Fetcher) { f.log = l.Named("release") } }

// New returns a Fetcher.
func New(opts ...Option) *Fetcher {
	f := &Fetcher{client: &http.Client{Timeout: time.Minute}, log: hclog.NewNullLogger()}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Fetch reads what registry says about package name of an ecosystem whose
// registry lists versions (resolver.Ecosystem.Listing): npm, pypi or
// cargo. registry is the registry's base URL: for npm
// https://registry.npmjs.org/, for pypi the simple index
// https://pypi.org/simple/, for cargo the sparse index
// https://index.crates.io/ (a "sparse+" prefix is accepted). It returns
// ErrNotFound for a 404, ErrUnsupported for other ecosystems, and errors
// wrapping ErrMalformed for responses that do not parse.
func (f *Fetcher) Fetch(ctx context.Context, ecosystem, registry, name string) (*Info, error) {
	base, err := url.Parse(strings.TrimPrefix(registry, "sparse+"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("fetching %s: registry %q is not an http(s) URL", name, registry)
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	if name == "" || strings.ContainsAny(name, "\x00\r\n") {
		return nil, fmt.Errorf("fetching: bad package name %q", name)
	}
	listing := resolver.NoListing
	e, err := resolver.Lookup(ecosystem)
	if err == nil {
		listing = e.Listing()
	}
	switch listing {
	case resolver.Packument:
		return f.fetchPackument(ctx, base.String(), name)
	case resolver.SimpleAPI:
		return f.fetchSimple(ctx, base.String(), e.NormalizeName(name))
	case resolver.SparseIndex:
		return f.fetchSparse(ctx, base.String(), name)
	}
	return nil, fmt.Errorf("fetching %s: %w: %s", name, ErrUnsupported, ecosystem)
}

// fetchPackument reads the npm packument of name under base.
func (f *Fetcher) fetchPackument(ctx context.Context, base, name string) (*Info, error) {
	// "@scope/name" is requested as "@scope%2fname", as npm does.
	u := base + strings.Replace(url.PathEscape(name), "%40", "@", 1)
	body, _, err := f.get(ctx, u, "application/json")
	if err != nil {
		return nil, err
	}
	return ParseNpm(name, body)
}

// fetchSimple reads the PEP 691 JSON simple-index page of the normalized
// name under base.
func (f *Fetcher) fetchSimple(ctx context.Context, base, norm string) (*Info, error) {
	u, _ := url.Parse(base + url.PathEscape(norm) + "/")
	body, ct, err := f.get(ctx, u.String(), "application/vnd.pypi.simple.v1+json")
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(ct, "application/vnd.pypi.simple.v1+json") && !strings.HasPrefix(ct, "application/json") {
		return nil, fmt.Errorf("fetching %s: %w: content type %q, want PEP 691 JSON", u, ErrMalformed, ct)
	}
	return ParsePyPI(norm, body, u)
}

// fetchSparse reads the sparse-index file of crate name under base, and
// the index's config.json for the download URL (listing.ParseCrateConfig;
// without a usable one, the versions have no artifact).
func (f *Fetcher) fetchSparse(ctx context.Context, base, name string) (*Info, error) {
	if err := listing.CheckCrateName(name); err != nil {
		return nil, fmt.Errorf("fetching: %w", err)
	}
	var dl string
	if b, _, err := f.get(ctx, base+"config.json", "application/json"); err != nil {
		f.log.Debug("crates index has no config.json", "registry", base, "error", err)
	} else if c, err := listing.ParseCrateConfig(b); err != nil {
		f.log.Debug("crates index config.json is unusable", "registry", base, "error", err)
	} else {
		dl = c.DL
	}
	body, _, err := f.get(ctx, base+listing.CrateIndexPath(name), "")
	if err != nil {
		return nil, err
	}
	return ParseCrates(name, body, dl)
}

func (f *Fetcher) get(ctx context.Context, u, accept string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", fmt.Errorf("fetching %s: %w", u, err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	req.Header.Set("User-Agent", "sandtrail-policy")
	f.log.Debug("fetching package metadata", "url", u)
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("fetching %s: %w", u, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return nil, "", fmt.Errorf("fetching %s: %w", u, ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		return nil, "", fmt.Errorf("fetching %s: status %s", u, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, "", fmt.Errorf("fetching %s: %w", u, err)
	}
	if len(body) > MaxBody {
		return nil, "", fmt.Errorf("fetching %s: response larger than %d bytes", u, MaxBody)
	}
	return body, resp.Header.Get("Content-Type"), nil
}
