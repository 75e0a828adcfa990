package journal

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"math/bits"
	"os"
	"path/filepath"

	"golang.org/x/mod/sumdb/tlog"
)

// hasher computes RFC 6962 leaf and node hashes without allocating.
type hasher struct {
	h   hash.Hash
	buf [1 + 2*tlog.HashSize]byte
	sum []byte
}

func newHasher() *hasher {
	return &hasher{h: sha256.New(), sum: make([]byte, 0, sha256.Size)}
}

// leaf returns SHA-256(0x00 || data), tlog.RecordHash(data).
func (x *hasher) leaf(data []byte) tlog.Hash {
	x.h.Reset()
	x.buf[0] = 0
	x.h.Write(x.buf[:1])
	x.h.Write(data)
	var out tlog.Hash
	copy(out[:], x.h.Sum(x.sum[:0]))
	return out
}

// node returns SHA-256(0x01 || l || r), tlog.NodeHash(l, r).
func (x *hasher) node(l, r tlog.Hash) tlog.Hash {
	x.buf[0] = 1
	copy(x.buf[1:], l[:])
	copy(x.buf[1+tlog.HashSize:], r[:])
	return sha256.Sum256(x.buf[:])
}

// edge is the right edge of a Merkle tree of n leaves: the roots of its
// complete subtrees, one per set bit of n (edge[l] is the subtree of 2^l
// leaves). It is all that is needed to append a leaf and to compute the root.
type edge struct {
	n     uint64
	level [64]tlog.Hash
}

// append adds the leaf hash h (of leaf e.n) and appends to dst the stored
// hashes of that record, as tlog.StoredHashesForRecordHash would.
func (e *edge) append(x *hasher, h tlog.Hash, dst []tlog.Hash) []tlog.Hash {
	dst = append(dst, h)
	l := 0
	for ; e.n>>l&1 == 1; l++ {
		h = x.node(e.level[l], h)
		dst = append(dst, h)
	}
	e.level[l] = h
	e.n++
	return dst
}

// root returns the tree hash of the e.n leaves (tlog.TreeHash).
func (e *edge) root(x *hasher) tlog.Hash {
	if e.n == 0 {
		return tlog.Hash(sha256.Sum256(nil))
	}
	l := bits.TrailingZeros64(e.n)
	h := e.level[l]
	for l++; l < 64; l++ {
		if e.n>>l&1 == 1 {
			h = x.node(e.level[l], h)
		}
	}
	return h
}

// loadEdge reads the right edge of a tree of n leaves from stored hashes.
func loadEdge(n uint64, r tlog.HashReader) (*edge, error) {
	e := &edge{n: n}
	var idx []int64
	var lv []int
	for l := 0; l < 64; l++ {
		if n>>l&1 == 1 {
			idx = append(idx, tlog.StoredHashIndex(l, int64(n>>l)-1))
			lv = append(lv, l)
		}
	}
	if len(idx) == 0 {
		return e, nil
	}
	hs, err := r.ReadHashes(idx)
	if err != nil {
		return nil, fmt.Errorf("reading tree edge: %w", err)
	}
	for i, l := range lv {
		e.level[l] = hs[i]
	}
	return e, nil
}

// fileHashes reads stored hashes from the hash file. It trusts the file: it
// is used for proofs and by the writer, never by Verify's recomputation.
type fileHashes struct {
	f     *os.File
	count int64 // stored hashes available
}

var _ tlog.HashReader = (*fileHashes)(nil)

func (fh *fileHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		if idx < 0 || idx >= fh.count {
			return nil, fmt.Errorf("%w: stored hash %d not in hash file (%d stored)", ErrCorrupt, idx, fh.count)
		}
		if _, err := fh.f.ReadAt(out[i][:], idx*tlog.HashSize); err != nil {
			return nil, fmt.Errorf("reading hash file: %w", err)
		}
	}
	return out, nil
}

// StoredHashes reads the hash file of a journal directory, read-only: a
// tlog.HashReader of the tree's stored hashes. It trusts the file, as
// proofs may: check what it gives against a signed root (Prove,
// tlog.CheckRecord, tlog.TreeHash against a checkpoint's).
type StoredHashes struct {
	fileHashes
}

var _ tlog.HashReader = (*StoredHashes)(nil)

// OpenStoredHashes opens the hash file of the journal in dir and checks
// that it holds the stored hashes of a tree of size entries (ErrCorrupt
// when it holds fewer).
func OpenStoredHashes(dir string, size uint64) (*StoredHashes, error) {
	f, err := os.Open(filepath.Join(dir, hashFile))
	if err != nil {
		return nil, fmt.Errorf("opening the hash file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening the hash file: %w", err)
	}
	h := &StoredHashes{fileHashes{f: f, count: st.Size() / tlog.HashSize}}
	if want := tlog.StoredHashCount(int64(size)); h.count < want {
		f.Close()
		return nil, fmt.Errorf("%w: the hash file holds %d stored hashes, fewer than the %d of a tree of %d entries", ErrCorrupt, h.count, want, size)
	}
	return h, nil
}

// Close closes the hash file.
func (h *StoredHashes) Close() error { return h.f.Close() }

// Leaf returns the stored leaf hash of entry seq.
func (h *StoredHashes) Leaf(seq uint64) (tlog.Hash, error) {
	hs, err := h.ReadHashes([]int64{tlog.StoredHashIndex(0, int64(seq))})
	if err != nil {
		return tlog.Hash{}, err
	}
	return hs[0], nil
}

// recordsCovered returns the largest n with StoredHashCount(n) <= count.
func recordsCovered(count int64) int64 {
	lo, hi := int64(0), count // StoredHashCount(n) >= n
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if tlog.StoredHashCount(mid) <= count {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}
