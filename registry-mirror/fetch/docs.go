package fetch

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/cache"
)

// Docs fetches an ecosystem's metadata documents through the cache and
// keeps them parsed in memory: a document younger than MetaTTL is served
// as it is; an older one is fetched again (once however many clients ask
// for it at the same time), cached only when it parses, and served stale
// from the cache when the upstream fails for any reason but a 404.
type Docs[T any] struct {
	env   *Env
	max   int // parsed documents kept in memory
	group cache.Group[Doc[T]]

	mu  sync.Mutex
	mem map[string]Doc[T]
}

// Doc is a parsed metadata document.
type Doc[T any] struct {
	Value   T
	Fetched time.Time
	// Stale: served from the cache past its TTL because the upstream
	// failed.
	Stale bool
}

// NewDocs returns the document fetcher of env, keeping at most max parsed
// documents in memory.
func NewDocs[T any](env *Env, max int) *Docs[T] {
	return &Docs[T]{env: env, max: max, mem: map[string]Doc[T]{}}
}

// Get returns the document cached under key, fetched from url with
// accept, and parsed by parse. It returns the upstream's *Error (a 404
// as not_found) when there is no usable copy.
func (d *Docs[T]) Get(ctx context.Context, key, url, accept string, parse func([]byte) (T, error)) (Doc[T], error) {
	now := d.env.Now()
	d.mu.Lock()
	doc, ok := d.mem[key]
	d.mu.Unlock()
	if ok && !doc.Stale && now.Sub(doc.Fetched) < d.env.MetaTTL {
		return doc, nil
	}
	if m, err := d.env.Cache.GetMeta(key); err == nil && m.Age(now) < d.env.MetaTTL {
		if v, err := parse(m.Body); err == nil {
			return d.remember(key, Doc[T]{Value: v, Fetched: m.Fetched}), nil
		}
	}
	doc, err, _ := d.group.Do(key, func() (Doc[T], error) { return d.fetch(ctx, key, url, accept, now, parse) })
	if err == nil {
		return d.remember(key, doc), nil
	}
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return doc, err
	}
	return d.stale(key, err, parse)
}

// fetch gets the document from the upstream and caches it when it
// parses.
func (d *Docs[T]) fetch(ctx context.Context, key, url, accept string, now time.Time, parse func([]byte) (T, error)) (Doc[T], error) {
	b, ct, err := d.env.Upstream.GetMeta(context.WithoutCancel(ctx), url, accept)
	if err != nil {
		return Doc[T]{}, err
	}
	v, err := parse(b)
	if err != nil {
		return Doc[T]{}, Errorf(http.StatusBadGateway, UpstreamError, err, "the upstream's metadata does not parse")
	}
	if err := d.env.Cache.PutMeta(key, cache.Meta{Body: b, Type: ct, Fetched: now}); err != nil {
		d.env.Log.Warn("caching metadata", "key", key, "error", err)
	}
	return Doc[T]{Value: v, Fetched: now}, nil
}

// stale returns the cached copy of key after the upstream failed with
// err, or err when there is none that parses.
func (d *Docs[T]) stale(key string, err error, parse func([]byte) (T, error)) (Doc[T], error) {
	m, cerr := d.env.Cache.GetMeta(key)
	if cerr != nil {
		return Doc[T]{}, err
	}
	v, perr := parse(m.Body)
	if perr != nil {
		return Doc[T]{}, err
	}
	d.env.Log.Warn("upstream failed, serving stale metadata", "key", key, "age", m.Age(d.env.Now()), "error", err)
	return d.remember(key, Doc[T]{Value: v, Fetched: m.Fetched, Stale: true}), nil
}

// remember keeps doc in memory, dropping another entry past the bound.
func (d *Docs[T]) remember(key string, doc Doc[T]) Doc[T] {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.mem[key]; !ok && len(d.mem) >= d.max {
		for k := range d.mem {
			delete(d.mem, k)
			break
		}
	}
	d.mem[key] = doc
	return doc
}
