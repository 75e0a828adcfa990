// Package cache is the mirror's store: a content-addressed blob store
// (sha256), an index from an artifact's key (its upstream URL) to its
// blob, and metadata kept with the time it was fetched, for a TTL and for
// serving stale metadata when the upstream is down.
//
// Blobs are written to a temporary file while they stream through a
// verifier and committed (renamed into place) only when the verifier
// accepted every byte: the store never holds an unverified artifact. Every
// write is atomic. The store is bounded: past its size bound it evicts the
// least recently served blobs. Concurrent fills of one key are coalesced
// into one (Group).
//
// Layout under the directory: blobs/sha256/<ab>/<hex>, keys/<ab>/<hex of
// the key's sha256>, meta/<ab>/<hex of the key's sha256>, tmp/.
package cache

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ErrNotFound is returned for a key or blob the cache does not hold.
var ErrNotFound = errors.New("cache: not found")

// Cache is a store in one directory.
type Cache struct {
	dir string
	max int64 // bytes of blobs; <= 0: unbounded

	mu    sync.Mutex
	lru   *list.List               // of *blob, most recently used first
	blobs map[string]*list.Element // by hex sha256
	total int64
	keys  map[string]Artifact // the key index, as read or written

	// The small blobs' bytes (OpenBody), most recently used first.
	smallLRU   *list.List
	small      map[string]*list.Element
	smallTotal int64
}

type blob struct {
	sum  string
	size int64
	// id is its file as the cache committed it, or found it at Open.
	id identity
}

// identity is what identifies a blob's file (identityOf).
type identity struct {
	ino                uint64
	size, mtime, ctime int64
}

// maxKeys bounds the key index kept in memory.
const maxKeys = 1 << 16

// Open opens (creating) the cache in dir, bounded to max bytes of blobs.
func Open(dir string, max int64) (*Cache, error) {
	for _, d := range []string{"blobs/sha256", "keys", "meta", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("creating cache directory: %w", err)
		}
	}
	// Leftovers of writes that never finished.
	tmps, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	for _, t := range tmps {
		os.Remove(filepath.Join(dir, "tmp", t.Name()))
	}
	c := &Cache{dir: dir, max: max, lru: list.New(), blobs: map[string]*list.Element{}, keys: map[string]Artifact{},
		smallLRU: list.New(), small: map[string]*list.Element{}}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// load reads the blobs that exist, oldest access first, and takes their
// files as they are (identityOf): `sandtrail mirror verify-cache` is what
// re-hashes them.
func (c *Cache) load() error {
	type found struct {
		blob
		at time.Time
	}
	var all []found
	root := filepath.Join(c.dir, "blobs", "sha256")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		all = append(all, found{blob{sum: d.Name(), size: fi.Size(), id: identityOf(fi)}, accessTime(fi)})
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the cache: %w", err)
	}
	sortByTime(all, func(f found) time.Time { return f.at })
	for _, f := range all {
		c.blobs[f.sum] = c.lru.PushFront(&blob{sum: f.sum, size: f.size, id: f.id})
		c.total += f.size
	}
	return nil
}

func (c *Cache) blobPath(sum string) string {
	return filepath.Join(c.dir, "blobs", "sha256", sum[:2], sum)
}

// keyPath is the file of key under kind ("keys" or "meta").
func (c *Cache) keyPath(kind, key string) string {
	h := sha256.Sum256([]byte(key))
	x := hex.EncodeToString(h[:])
	return filepath.Join(c.dir, kind, x[:2], x)
}

// Artifact is what the cache knows of a stored artifact.
type Artifact struct {
	// SHA256 is the hex sha256 of the bytes: the blob's name.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Digests are the publisher's digests the bytes were verified against,
	// as the ecosystem writes them.
	Digests []string `json:"digests"`
	// Stored is when the artifact was verified and stored.
	Stored time.Time `json:"stored"`
	// Source is the URL the bytes were fetched from when it is not the
	// key: the upstream redirected the mirror there.
	Source string `json:"source,omitempty"`
}

// Put reads r to its end into a new blob and indexes it under key, with
// the publisher's digests the bytes were verified against. r is a
// verifier: an error from it (a mismatch, too many bytes, an upstream that
// broke off) discards what was written, and nothing is indexed.
func (c *Cache) Put(key string, r io.Reader, digests []string) (Artifact, error) {
	return c.PutFrom(key, "", r, digests)
}

// PutFrom is Put for bytes fetched from source, a URL other than key's (a
// redirect's target), which the artifact remembers as its Source.
func (c *Cache) PutFrom(key, source string, r io.Reader, digests []string) (Artifact, error) {
	tmp, err := os.CreateTemp(filepath.Join(c.dir, "tmp"), "blob-")
	if err != nil {
		return Artifact{}, fmt.Errorf("cache: creating a blob: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), r)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Artifact{}, err
	}
	a := Artifact{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n, Digests: digests, Stored: time.Now().UTC(), Source: source}
	p := c.blobPath(a.SHA256)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return Artifact{}, fmt.Errorf("cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return Artifact{}, fmt.Errorf("cache: committing a blob: %w", err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return Artifact{}, fmt.Errorf("cache: committing a blob: %w", err)
	}
	c.added(a.SHA256, n, identityOf(fi))
	if err := c.writeJSON("keys", key, a); err != nil {
		return Artifact{}, err
	}
	c.remember(key, a)
	return a, nil
}

// added accounts a new blob, its file id, and evicts past the bound.
func (c *Cache) added(sum string, size int64, id identity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.blobs[sum]; ok {
		e.Value.(*blob).id = id // committed again: a new file
		c.lru.MoveToFront(e)
		return
	}
	c.blobs[sum] = c.lru.PushFront(&blob{sum: sum, size: size, id: id})
	c.total += size
	for c.max > 0 && c.total > c.max && c.lru.Len() > 1 {
		c.forget(c.lru.Back().Value.(*blob).sum)
	}
}

// forget drops the blob sum, and its file; c.mu is held.
func (c *Cache) forget(sum string) {
	if e, ok := c.blobs[sum]; ok {
		c.total -= e.Value.(*blob).size
		c.lru.Remove(e)
		delete(c.blobs, sum)
	}
	if e, ok := c.small[sum]; ok {
		c.dropSmall(e)
	}
	os.Remove(c.blobPath(sum))
}

// Get returns the artifact stored under key and its blob, open for
// reading; ErrNotFound when there is none (or its blob was evicted). The
// caller closes the file.
func (c *Cache) Get(key string) (Artifact, *os.File, error) {
	a, err := c.Lookup(key)
	if err != nil {
		return a, nil, err
	}
	f, err := c.Open(a.SHA256)
	return a, f, err
}

// Lookup returns the artifact stored under key, without opening its blob;
// ErrNotFound when there is none.
func (c *Cache) Lookup(key string) (Artifact, error) {
	c.mu.Lock()
	a, ok := c.keys[key]
	c.mu.Unlock()
	if ok {
		return a, nil
	}
	if err := c.readJSON("keys", key, &a); err != nil {
		return a, err
	}
	c.remember(key, a)
	return a, nil
}

// remember keeps a key's artifact in memory, forgetting them all past
// maxKeys.
func (c *Cache) remember(key string, a Artifact) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.keys) >= maxKeys {
		clear(c.keys)
	}
	c.keys[key] = a
}

// Open opens the blob with the hex sha256 sum and marks it used. It does
// not check the file (OpenBody does).
func (c *Cache) Open(sum string) (*os.File, error) {
	if len(sum) != 64 {
		return nil, ErrNotFound
	}
	f, err := os.Open(c.blobPath(sum))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	c.used(sum)
	return f, nil
}

// used marks the blob sum used: first in the eviction order. The cache
// sets none of its file's times, which are part of its identity
// (OpenBody); after a restart, the order is the files' access times, as
// the kernel keeps them (with relatime, to the day).
func (c *Cache) used(sum string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.blobs[sum]; ok {
		c.lru.MoveToFront(e)
	}
}

// Meta is metadata kept by the cache.
type Meta struct {
	Body    []byte    `json:"body"`
	Type    string    `json:"type,omitempty"`
	Fetched time.Time `json:"fetched"`
}

// Age is how long ago m was fetched.
func (m Meta) Age(now time.Time) time.Duration { return now.Sub(m.Fetched) }

// PutMeta stores metadata under key.
func (c *Cache) PutMeta(key string, m Meta) error { return c.writeJSON("meta", key, m) }

// GetMeta returns the metadata under key; ErrNotFound when there is none.
func (c *Cache) GetMeta(key string) (Meta, error) {
	var m Meta
	err := c.readJSON("meta", key, &m)
	return m, err
}

func (c *Cache) writeJSON(kind, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("cache: encoding %s: %w", kind, err)
	}
	p := c.keyPath(kind, key)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Join(c.dir, "tmp"), kind+"-")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err = tmp.Write(b); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		return fmt.Errorf("cache: writing %s: %w", kind, err)
	}
	return nil
}

func (c *Cache) readJSON(kind, key string, v any) error {
	b, err := os.ReadFile(c.keyPath(kind, key))
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("cache: reading %s of %q: %w", kind, key, err)
	}
	return nil
}

// Stats says what the cache holds.
type Stats struct {
	Blobs int   `json:"blobs"`
	Bytes int64 `json:"bytes"`
	Max   int64 `json:"max_bytes"`
}

// Stats returns the cache's counts.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Blobs: c.lru.Len(), Bytes: c.total, Max: c.max}
}

// Verify re-hashes every blob and removes those whose bytes no longer hash
// to their name; it returns their names. progress, when not nil, is called
// after each blob with the counts so far.
func (c *Cache) Verify(progress func(done, total int)) (bad []string, err error) {
	c.mu.Lock()
	sums := make([]string, 0, len(c.blobs))
	for s := range c.blobs {
		sums = append(sums, s)
	}
	c.mu.Unlock()
	for i, s := range sums {
		ok, err := c.check(s)
		if err != nil {
			return bad, err
		}
		if !ok {
			bad = append(bad, s)
			c.remove(s)
		}
		if progress != nil {
			progress(i+1, len(sums))
		}
	}
	return bad, nil
}

// check hashes the blob sum; a blob gone meanwhile (evicted) is fine.
func (c *Cache) check(sum string) (bool, error) {
	f, err := os.Open(c.blobPath(sum))
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("cache: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, fmt.Errorf("cache: reading blob %s: %w", sum, err)
	}
	return hex.EncodeToString(h.Sum(nil)) == sum, nil
}

// remove drops a blob.
func (c *Cache) remove(sum string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget(sum)
}
