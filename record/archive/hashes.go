package archive

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/mod/sumdb/tlog"
)

// hashFileName is the journal's file of stored hashes, 32 bytes each in
// tlog.StoredHashIndex order (docs/journal.md). The journal exports no
// reader of it; this one is read-only and trusts nothing it reads: every
// hash taken from it is checked against a signed root before it counts.
const hashFileName = "hashes"

// storedHashes reads a journal's hash file.
type storedHashes struct {
	f     *os.File
	count int64
}

var _ tlog.HashReader = (*storedHashes)(nil)

// openHashes opens the hash file of the journal in dir and checks that it
// holds the stored hashes of a tree of size entries.
func openHashes(dir string, size uint64) (*storedHashes, error) {
	f, err := os.Open(filepath.Join(dir, hashFileName))
	if err != nil {
		return nil, fmt.Errorf("opening the journal's hash file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening the journal's hash file: %w", err)
	}
	h := &storedHashes{f: f, count: st.Size() / tlog.HashSize}
	if want := tlog.StoredHashCount(int64(size)); h.count < want {
		f.Close()
		return nil, fmt.Errorf("the journal's hash file holds %d stored hashes, fewer than the %d of its checkpoint of size %d (run sandtrail verify)", h.count, want, size)
	}
	return h, nil
}

func (h *storedHashes) Close() error { return h.f.Close() }

// ReadHashes implements tlog.HashReader.
func (h *storedHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		if idx < 0 || idx >= h.count {
			return nil, fmt.Errorf("stored hash %d is not in the hash file (%d stored)", idx, h.count)
		}
		if _, err := h.f.ReadAt(out[i][:], idx*tlog.HashSize); err != nil {
			return nil, fmt.Errorf("reading the journal's hash file: %w", err)
		}
	}
	return out, nil
}

// leaf returns the stored leaf hash of entry seq.
func (h *storedHashes) leaf(seq uint64) (tlog.Hash, error) {
	hs, err := h.ReadHashes([]int64{tlog.StoredHashIndex(0, int64(seq))})
	if err != nil {
		return tlog.Hash{}, err
	}
	return hs[0], nil
}
