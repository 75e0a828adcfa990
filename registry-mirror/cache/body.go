package cache

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// ErrChanged is returned for a blob whose file is no longer the one the
// cache stored (another inode, size or modification time), or whose bytes
// no longer hash to its name. The blob is removed: it is fetched and
// verified again.
var ErrChanged = errors.New("cache: the blob changed since it was stored")

// Body is a blob's bytes, open to serve: a small blob's from memory, a
// larger one's from its file (which http.ServeContent sends with
// sendfile). The caller closes it.
type Body struct {
	f *os.File
	r *bytes.Reader
}

// File is the blob's open file, nil for a blob served from memory.
func (b *Body) File() *os.File { return b.f }

// Size is the number of bytes of a blob served from memory that are yet
// to be read; -1 for one served from its file.
func (b *Body) Size() int64 {
	if b.f != nil {
		return -1
	}
	return int64(b.r.Len())
}

func (b *Body) Read(p []byte) (int, error) {
	if b.f != nil {
		return b.f.Read(p)
	}
	return b.r.Read(p)
}

func (b *Body) Seek(offset int64, whence int) (int64, error) {
	if b.f != nil {
		return b.f.Seek(offset, whence)
	}
	return b.r.Seek(offset, whence)
}

// WriteTo writes the rest of the blob to w: from memory in one write.
func (b *Body) WriteTo(w io.Writer) (int64, error) {
	if b.f != nil {
		return io.Copy(w, b.f)
	}
	return b.r.WriteTo(w)
}

// Close closes the blob's file, if it has one.
func (b *Body) Close() error {
	if b.f != nil {
		return b.f.Close()
	}
	return nil
}

// The bounds of the blobs kept in memory: each at most maxSmall bytes,
// maxSmallTotal bytes in all.
const (
	maxSmall      = 64 << 10
	maxSmallTotal = 64 << 20
)

// small is a blob kept in memory, and when its file was last found
// unchanged.
type small struct {
	sum     string
	b       []byte
	checked time.Time
}

// smallCheckEvery is how often the file of a blob served from memory is
// checked: its bytes are the verified ones whatever happens to the file,
// and the check only finds a file that changed (and removes the blob).
const smallCheckEvery = time.Second

// OpenBody opens the blob sum, checked against what the cache knows of
// it, and marks it used. Its file must still be the file the cache stored
// (its inode, size and modification time, as the cache recorded them when
// it committed the blob, or found them when it opened the directory). A
// blob of maxSmall bytes or less comes from memory: its file is read once
// and hashed, and its bytes kept only when they hash to sum; its file is
// still checked, at most once a smallCheckEvery (one stat). Otherwise it
// returns ErrChanged and removes the blob; ErrNotFound when there is no
// such blob.
func (c *Cache) OpenBody(sum string) (*Body, error) {
	if b, check, ok := c.smallBytes(sum); ok {
		if !check {
			c.used(sum)
			return &Body{r: bytes.NewReader(b)}, nil
		}
		fi, err := os.Stat(c.blobPath(sum))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			c.remove(sum)
			return nil, ErrNotFound
		case err != nil:
			return nil, fmt.Errorf("cache: %w", err)
		case !c.unchanged(sum, fi):
			c.remove(sum)
			return nil, ErrChanged
		}
		c.used(sum)
		return &Body{r: bytes.NewReader(b)}, nil
	}
	f, err := c.Open(sum)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !c.unchanged(sum, fi) {
		err = ErrChanged
	}
	if err == nil && fi.Size() <= maxSmall {
		var b []byte
		if b, err = c.readSmall(sum, f, fi.Size()); err == nil {
			f.Close()
			return &Body{r: bytes.NewReader(b)}, nil
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, ErrChanged) {
			c.remove(sum)
		}
		return nil, err
	}
	return &Body{f: f}, nil
}

// readSmall reads the small blob sum from f, of size bytes, checks it
// against its name and keeps it in memory.
func (c *Cache) readSmall(sum string, f *os.File, size int64) ([]byte, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("cache: reading blob %s: %w", sum, err)
	}
	if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
		return nil, fmt.Errorf("%w: blob %s hashes to %x", ErrChanged, sum, h)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.blobs[sum]; !ok {
		return b, nil // evicted meanwhile: served, not kept
	}
	if _, ok := c.small[sum]; !ok {
		c.small[sum] = c.smallLRU.PushFront(&small{sum: sum, b: b, checked: time.Now()})
		c.smallTotal += int64(len(b))
	}
	for c.smallTotal > maxSmallTotal {
		c.dropSmall(c.smallLRU.Back())
	}
	return b, nil
}

// smallBytes returns the blob sum from memory, and whether its file is
// due a check (which it then counts as made).
func (c *Cache) smallBytes(sum string) (b []byte, check, ok bool) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.small[sum]
	if !ok {
		return nil, false, false
	}
	c.smallLRU.MoveToFront(e)
	s := e.Value.(*small)
	if check = now.Sub(s.checked) >= smallCheckEvery; check {
		s.checked = now
	}
	return s.b, check, true
}

// dropSmall forgets the blob in memory at e; c.mu is held.
func (c *Cache) dropSmall(e *list.Element) {
	s := e.Value.(*small)
	c.smallLRU.Remove(e)
	delete(c.small, s.sum)
	c.smallTotal -= int64(len(s.b))
}

// unchanged reports whether fi, the blob sum's file as opened, is the file
// the cache recorded.
func (c *Cache) unchanged(sum string, fi fs.FileInfo) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.blobs[sum]
	if !ok {
		return true // stored before this process knew of it: Open's check
	}
	return e.Value.(*blob).id == identityOf(fi)
}
