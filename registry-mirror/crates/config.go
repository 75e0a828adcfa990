package crates

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
)

// config is what the mirror reads of the upstream's config.json.
type config struct {
	// DL is the download template of the upstream's crates.
	DL string `json:"dl"`
	// AuthRequired: every request needs a token, which the mirror does not
	// have.
	AuthRequired bool `json:"auth-required"`
}

// dlMarkers are the markers of a dl template; a template with none is a
// base URL to which cargo appends /{crate}/{version}/download.
var dlMarkers = []string{"{crate}", "{version}", "{prefix}", "{lowerprefix}", "{sha256-checksum}"}

// parseConfig reads an upstream config.json. It returns an error wrapping
// ErrBadConfig when it is not JSON, has no dl, asks for authentication, or
// its dl does not expand to an absolute http(s) URL.
func parseConfig(b []byte) (*config, error) {
	var c config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if c.AuthRequired {
		return nil, fmt.Errorf("%w: the upstream requires authentication, which the mirror does not forward", ErrBadConfig)
	}
	u, err := url.Parse(downloadURL(c.DL, "abcd", "1.0.0", strings.Repeat("0", 64)))
	if c.DL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: dl %q is not an http(s) URL template", ErrBadConfig, render.Clip(c.DL, 120))
	}
	return &c, nil
}

// downloadURL expands a dl template for one version as cargo does.
func downloadURL(dl, name, version, cksum string) string {
	has := false
	for _, m := range dlMarkers {
		has = has || strings.Contains(dl, m)
	}
	if !has {
		dl += "/{crate}/{version}/download"
	}
	return strings.NewReplacer("{crate}", name, "{version}", version, "{prefix}", prefixOf(name),
		"{lowerprefix}", strings.ToLower(prefixOf(name)), "{sha256-checksum}", cksum).Replace(dl)
}

// config returns the upstream's configuration (stale when the upstream
// is down and the cache has it).
func (h *Handler) config(ctx context.Context) (*config, bool, error) {
	check := func(b []byte) error { _, err := parseConfig(b); return err }
	m, stale, err := h.metas.Get(ctx, "crates:config:"+h.upstream.String(), h.upstream.String()+"config.json", "application/json", check)
	if err != nil {
		return nil, false, err
	}
	c, err := parseConfig(m.Body)
	if err != nil {
		return nil, false, fetch.Errorf(http.StatusBadGateway, fetch.UpstreamError, err, "the cached config.json is unusable")
	}
	return c, stale, nil
}

// serveConfig serves the mirror's config.json, once the upstream's is
// known to be usable: dl points at the mirror, and there is no api.
func (h *Handler) serveConfig(w http.ResponseWriter, r *http.Request) error {
	if _, _, err := h.config(r.Context()); err != nil {
		return err
	}
	b, err := json.Marshal(map[string]string{"dl": "http://" + r.Host + h.prefix + "dl/{crate}/{version}/download"})
	if err != nil {
		return fmt.Errorf("encoding config.json: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	return nil
}
