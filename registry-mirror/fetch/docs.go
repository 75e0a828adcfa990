package fetch

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Docs keeps an ecosystem's metadata documents parsed in memory, in front
// of Metas: a document younger than MetaTTL is served as it is; an older
// one comes through Metas (fetched once however many ask, cached only when
// it parses, stale from the cache when the upstream fails for any reason
// but a 404).
type Docs[T any] struct {
	metas *Metas
	env   *Env
	max   int // parsed documents kept in memory

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
	return &Docs[T]{metas: NewMetas(env), env: env, max: max, mem: map[string]Doc[T]{}}
}

// Get returns the document cached under key, fetched from url with
// accept, and parsed by parse. It returns the upstream's *Error (a 404
// as not_found) when there is no usable copy.
func (d *Docs[T]) Get(ctx context.Context, key, url, accept string, parse func([]byte) (T, error)) (Doc[T], error) {
	d.mu.Lock()
	doc, ok := d.mem[key]
	d.mu.Unlock()
	if ok && !doc.Stale && d.env.Now().Sub(doc.Fetched) < d.env.MetaTTL {
		return doc, nil
	}
	m, stale, err := d.metas.Get(ctx, key, url, accept, func(b []byte) error { _, err := parse(b); return err })
	if err != nil {
		return Doc[T]{}, err
	}
	v, err := parse(m.Body)
	if err != nil {
		return Doc[T]{}, Errorf(http.StatusBadGateway, UpstreamError, err, "the cached metadata does not parse")
	}
	return d.remember(key, Doc[T]{Value: v, Fetched: m.Fetched, Stale: stale}), nil
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
