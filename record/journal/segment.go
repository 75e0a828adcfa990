package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

const (
	segPrefix = "seg-"
	segSuffix = ".log"
	// hashFile holds the tree's stored hashes in tlog.StoredHashIndex order,
	// 32 bytes each. It is derived data: Open repairs it, Verify ignores it
	// except to locate a tampered entry more precisely.
	hashFile = "hashes"
	lockFile = "LOCK"
	cpDir    = "checkpoints"
	cpLatest = "latest"
)

// segmentName returns the file name of the segment whose first entry is seq.
func segmentName(first uint64) string {
	return fmt.Sprintf("%s%012d%s", segPrefix, first, segSuffix)
}

// parseSegmentName returns the first seq of a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, segPrefix)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, segSuffix)
	if !ok || len(s) < 12 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || segmentName(n) != name {
		return 0, false
	}
	return n, true
}

type segment struct {
	first uint64
	path  string
}

// listSegments returns the segments of dir ordered by first seq. A file
// named like a segment that does not parse is an error.
func listSegments(dir string) ([]segment, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing segments: %w", err)
	}
	var segs []segment
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, segPrefix) {
			continue
		}
		first, ok := parseSegmentName(name)
		if !ok || !e.Type().IsRegular() {
			return nil, fmt.Errorf("%w: unexpected file %s", ErrCorrupt, name)
		}
		segs = append(segs, segment{first: first, path: filepath.Join(dir, name)})
	}
	slices.SortFunc(segs, func(a, b segment) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	return segs, nil
}

// Scan calls fn for each complete entry with seq >= from, in order. raw is
// the canonical event encoding (the Merkle leaf data); it is only valid
// during the call. Pruned entries (tombstones, see Prune) are skipped: fn
// never sees them, so the seqs it gets may have gaps. Scan is safe while
// another process or goroutine appends or prunes: it stops at the last
// complete entry, treating an incomplete frame at the end of the last
// segment as not yet written. It checks each frame's CRC and that entry N
// carries seq N, and returns an error wrapping ErrCorrupt for a bad entry
// in the middle or a gap between segments. An error from fn stops the scan
// and is returned as is.
//
// Scan does not check the Merkle tree or any signature: use Verify for that.
func Scan(dir string, from uint64, fn func(seq uint64, raw []byte) error) error {
	err := scan(dir, from, fn)
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// ScanAll is Scan that also reports the pruned entries: it calls entry for
// each complete entry, as Scan calls fn, and pruned for each tombstone,
// with the leaf hash the tombstone keeps in place of the entry. Followers
// that must tell a pruned entry from a missing one (the index's check that
// it still describes this journal) read with it.
func ScanAll(dir string, from uint64, entry func(seq uint64, raw []byte) error, pruned func(seq uint64, leaf tlog.Hash) error) error {
	err := scanFrames(dir, from, func(seq uint64, p []byte, tomb bool) error {
		if tomb {
			return pruned(seq, tombstoneLeaf(p))
		}
		return entry(seq, p)
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// scan is Scan without the handling of errStop.
func scan(dir string, from uint64, fn func(seq uint64, raw []byte) error) error {
	return scanFrames(dir, from, func(seq uint64, p []byte, tomb bool) error {
		if tomb {
			return nil
		}
		return fn(seq, p)
	})
}

// scanFrames calls fn for each complete frame with seq >= from: p is the
// entry's canonical encoding, or, when pruned is set, the tombstone's
// payload (tombstoneLeaf).
func scanFrames(dir string, from uint64, fn func(seq uint64, p []byte, pruned bool) error) error {
	segs, err := listSegments(dir)
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		return nil
	}
	start := 0
	for i, s := range segs {
		if s.first <= from {
			start = i
		}
	}
	want := segs[start].first
	if start == 0 && want != 0 {
		return fmt.Errorf("%w: first segment %s does not start at seq 0", ErrCorrupt, filepath.Base(segs[0].path))
	}
	for i := start; i < len(segs); i++ {
		s := segs[i]
		if s.first != want {
			return fmt.Errorf("%w: segment %s starts at seq %d, want %d", ErrCorrupt, filepath.Base(s.path), s.first, want)
		}
		r, err := openSegmentReader(s.path, s.first)
		if err != nil {
			return err
		}
		for {
			seq := r.seq
			p, err := r.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var fe *frameError
				if errors.As(err, &fe) && i == len(segs)-1 {
					torn, terr := r.torn(fe)
					if terr != nil {
						r.Close()
						return terr
					}
					if torn {
						r.Close()
						return nil
					}
				}
				r.Close()
				if fe != nil {
					return fmt.Errorf("%w: segment %s: %v", ErrCorrupt, filepath.Base(s.path), fe)
				}
				return err
			}
			if seq < from {
				continue
			}
			if err := fn(seq, p, r.pruned); err != nil {
				r.Close()
				return err
			}
		}
		want = r.seq
		r.Close()
	}
	return nil
}

// Entry returns a copy of the canonical encoding of entry seq. It returns
// an error wrapping ErrNotFound when the journal has no such complete entry,
// and a *PrunedError (which wraps ErrPruned, and holds the entry's leaf
// hash) when the entry was pruned.
func Entry(dir string, seq uint64) ([]byte, error) {
	var out []byte
	var pe *PrunedError
	err := scanFrames(dir, seq, func(s uint64, p []byte, pruned bool) error {
		if pruned {
			pe = &PrunedError{Seq: s, Leaf: tombstoneLeaf(p)}
		} else {
			out = append([]byte(nil), p...)
		}
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, err
	}
	if pe != nil {
		return nil, pe
	}
	if out == nil {
		return nil, fmt.Errorf("%w: entry %d", ErrNotFound, seq)
	}
	return out, nil
}
