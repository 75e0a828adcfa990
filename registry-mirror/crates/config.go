package crates

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// config returns the upstream's configuration (stale when the upstream
// is down and the cache has it).
func (h *Handler) config(ctx context.Context) (*listing.CrateConfig, bool, error) {
	check := func(b []byte) error { _, err := listing.ParseCrateConfig(b); return err }
	m, stale, err := h.metas.Get(ctx, "crates:config:"+h.upstream.String(), h.upstream.String()+"config.json", "application/json", check)
	if err != nil {
		return nil, false, err
	}
	c, err := listing.ParseCrateConfig(m.Body)
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
