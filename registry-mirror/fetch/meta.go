package fetch

import (
	"context"
	"errors"
	"net/http"

	"github.com/sandtrail/sandtrail/registry-mirror/cache"
)

// Metas fetches metadata documents through the cache: from the cache while
// they are younger than Env.MetaTTL, else from the upstream (once however
// many clients ask at the same time), else, when the upstream fails with
// anything but a 404, stale from the cache.
type Metas struct {
	env   *Env
	group cache.Group[cache.Meta]
}

// NewMetas returns the metadata fetcher of env.
func NewMetas(env *Env) *Metas { return &Metas{env: env} }

// Get returns the document cached under key, fetched from url. check
// validates what the upstream sent before it is cached; a document it
// refuses is an upstream_error and is not cached. stale says the document
// came from the cache because the upstream failed.
func (m *Metas) Get(ctx context.Context, key, url, accept string, check func([]byte) error) (meta cache.Meta, stale bool, err error) {
	now := m.env.Now()
	if c, err := m.env.Cache.GetMeta(key); err == nil && c.Age(now) < m.env.MetaTTL {
		return c, false, nil
	}
	meta, err, _ = m.group.Do(key, func() (cache.Meta, error) {
		// A fetch that finished since the check above cached it.
		if c, err := m.env.Cache.GetMeta(key); err == nil && c.Age(now) < m.env.MetaTTL {
			return c, nil
		}
		b, ct, err := m.env.Upstream.GetMeta(context.WithoutCancel(ctx), url, accept)
		if err != nil {
			return cache.Meta{}, err
		}
		if err := check(b); err != nil {
			return cache.Meta{}, Errorf(http.StatusBadGateway, UpstreamError, err, "the upstream's metadata is unusable: %v", err)
		}
		got := cache.Meta{Body: b, Type: ct, Fetched: now}
		if err := m.env.Cache.PutMeta(key, got); err != nil {
			m.env.Log.Warn("caching metadata", "key", key, "error", err)
		}
		return got, nil
	})
	if err == nil {
		return meta, false, nil
	}
	if e := (*Error)(nil); errors.As(err, &e) && e.Status == http.StatusNotFound {
		return cache.Meta{}, false, err
	}
	c, cerr := m.env.Cache.GetMeta(key)
	if cerr != nil {
		return cache.Meta{}, false, err
	}
	m.env.Log.Warn("upstream failed, serving stale metadata", "key", key, "age", c.Age(now), "error", err)
	return c, true, nil
}
