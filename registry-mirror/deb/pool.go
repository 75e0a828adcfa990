package deb

import (
	"compress/bzip2"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/xi2/xz"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/verify"
)

// Bounds on the pool's indexes.
const (
	// maxKnown bounds the verified Packages files remembered per archive.
	maxKnown = 64
	// maxIndexed bounds the entries of the indexes held in memory, all
	// archives together: bookworm main amd64 has 63,440, which take 18 MB
	// of heap (about 290 bytes each), so the bound is about 90 MB.
	maxIndexed = 300_000
	// maxPackagesText bounds a Packages file, uncompressed (bookworm
	// main amd64's is about 45 MB).
	maxPackagesText = 1 << 30
)

// known is a verified Packages file of an archive: where it was fetched,
// and the sum and compression its Release gave.
type known struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Comp   string `json:"comp"`
}

// debEntry is what a Packages paragraph says of one pool file.
type debEntry struct {
	sum     sum
	pkg     string
	version string
	// arch is the paragraph's Architecture ("amd64", "all"), for the purl.
	arch string
}

// index is one Packages file's entries, by Filename.
type index struct {
	files map[string]debEntry
	used  uint64
}

// pool finds the verified Packages entry of a pool file.
type pool struct {
	env       *fetch.Env
	artifacts *fetch.Artifacts
	loads     cache.Group[*index]

	mu      sync.Mutex
	known   map[string][]known // by archive URL, newest first
	loaded  map[string]*index  // by the Packages file's sha256
	entries int
	tick    uint64
}

func newPool(env *fetch.Env, a *fetch.Artifacts) *pool {
	return &pool{env: env, artifacts: a, known: map[string][]known{}, loaded: map[string]*index{}}
}

// learn remembers k, a Packages file of archive a just verified, and
// indexes it in the background so that the .debs that follow need not
// wait.
func (p *pool) learn(a *archive, k known) {
	p.mu.Lock()
	list := p.knownLocked(a)
	out := []known{k}
	for _, o := range list {
		if o.SHA256 != k.SHA256 && len(out) < maxKnown {
			out = append(out, o)
		}
	}
	p.known[a.base.String()] = out
	p.mu.Unlock()
	b, _ := json.Marshal(out)
	if err := p.env.Cache.PutMeta(poolKey(a), cache.Meta{Body: b, Fetched: p.env.Now()}); err != nil {
		p.env.Log.Warn("caching the packages files of an archive", "archive", a.name, "error", err)
	}
	go func() {
		if _, err := p.load(context.Background(), k); err != nil {
			p.env.Log.Warn("indexing a packages file", "url", k.URL, "error", err)
		}
	}()
}

func poolKey(a *archive) string { return "deb:packages:" + a.base.String() }

// knownLocked is the archive's list, read from the cache the first time.
func (p *pool) knownLocked(a *archive) []known {
	if l, ok := p.known[a.base.String()]; ok {
		return l
	}
	var l []known
	if m, err := p.env.Cache.GetMeta(poolKey(a)); err == nil {
		_ = json.Unmarshal(m.Body, &l) // a list that does not parse is an empty one
	}
	var ok []known
	for _, k := range l {
		if _, err := verify.Hex(verify.SHA256, k.SHA256); err == nil && strings.HasPrefix(k.URL, a.base.String()) && len(ok) < maxKnown {
			ok = append(ok, k)
		}
	}
	p.known[a.base.String()] = ok
	return ok
}

// lookup finds the pool file file (an archive path) in the archive's
// verified Packages files, newest first.
func (p *pool) lookup(ctx context.Context, a *archive, file string) (debEntry, bool) {
	p.mu.Lock()
	list := append([]known(nil), p.knownLocked(a)...)
	p.mu.Unlock()
	for _, k := range list {
		idx, err := p.load(ctx, k)
		if err != nil {
			p.env.Log.Warn("indexing a packages file", "url", k.URL, "error", err)
			continue
		}
		if e, ok := idx.files[file]; ok {
			return e, true
		}
	}
	return debEntry{}, false
}

// load returns the index of k: from memory, else parsed from the cache's
// copy (fetched and verified again against k's sum when the cache no
// longer has it).
func (p *pool) load(ctx context.Context, k known) (*index, error) {
	p.mu.Lock()
	if idx := p.loaded[k.SHA256]; idx != nil {
		p.tick++
		idx.used = p.tick
		p.mu.Unlock()
		return idx, nil
	}
	p.mu.Unlock()
	idx, err, _ := p.loads.Do(k.SHA256, func() (*index, error) {
		p.mu.Lock()
		idx := p.loaded[k.SHA256] // a load that just ended
		p.mu.Unlock()
		if idx != nil {
			return idx, nil
		}
		d, err := verify.Hex(verify.SHA256, k.SHA256)
		if err != nil {
			return nil, err
		}
		want := fetch.Want{URL: k.URL, Size: k.Size, Digests: []verify.Digest{d}, Names: []string{"sha256:" + k.SHA256}}
		_, f, _, err := p.artifacts.Get(context.WithoutCancel(ctx), want)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		files, err := readPackages(f, k.Comp)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", event.Clip(k.URL, 80), err)
		}
		idx = &index{files: files}
		p.add(k.SHA256, idx)
		return idx, nil
	})
	return idx, err
}

// add holds idx in memory, dropping the least recently used indexes past
// maxIndexed entries.
func (p *pool) add(sha string, idx *index) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.entries+len(idx.files) > maxIndexed && len(p.loaded) > 0 {
		var lru string
		for s, o := range p.loaded {
			if lru == "" || o.used < p.loaded[lru].used {
				lru = s
			}
		}
		p.entries -= len(p.loaded[lru].files)
		delete(p.loaded, lru)
	}
	p.tick++
	idx.used = p.tick
	p.loaded[sha] = idx
	p.entries += len(idx.files)
}

// readPackages reads a Packages file (compressed with comp: "", ".gz",
// ".xz" or ".bz2"), streaming, into its entries by Filename.
func readPackages(r io.Reader, comp string) (map[string]debEntry, error) {
	text, err := decompress(r, comp)
	if err != nil {
		return nil, err
	}
	files := map[string]debEntry{}
	err = eachPackage(&capped{r: text, n: maxPackagesText}, func(name string, e debEntry) error {
		if o, dup := files[name]; dup && o.sum != e.sum {
			return fmt.Errorf("%w: %s is listed twice with different sums", ErrSyntax, event.Clip(name, 80))
		}
		if len(files) >= maxIndexed {
			return fmt.Errorf("%w: more than %d packages", ErrSyntax, maxIndexed)
		}
		files[name] = e
		return nil
	})
	return files, err
}

func decompress(r io.Reader, comp string) (io.Reader, error) {
	switch comp {
	case "":
		return r, nil
	case ".gz":
		return gzip.NewReader(r)
	case ".xz":
		// The dictionary is bounded by xz.DefaultDictMax (64 MiB), whatever
		// the stream's header asks for.
		return xz.NewReader(r, 0)
	case ".bz2":
		return bzip2.NewReader(r), nil
	}
	return nil, fmt.Errorf("deb: unsupported compression %q", comp)
}

// capped reads at most n bytes, then fails.
type capped struct {
	r io.Reader
	n int64
}

func (c *capped) Read(b []byte) (int, error) {
	if c.n <= 0 {
		return 0, fmt.Errorf("%w: a Packages file larger than %d bytes uncompressed", ErrSyntax, int64(maxPackagesText))
	}
	if int64(len(b)) > c.n {
		b = b[:c.n]
	}
	n, err := c.r.Read(b)
	c.n -= int64(n)
	return n, err
}
