package journal

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/sandtrail/sandtrail/record/atomicfile"
	"github.com/sandtrail/sandtrail/record/event"
)

// Errors of pruning.
var (
	// ErrPruned is wrapped by the *PrunedError that Entry returns for an
	// entry that Prune replaced with a tombstone.
	ErrPruned = errors.New("journal: entry pruned")
	// ErrUncovered means Prune was asked for an entry that no signed
	// checkpoint covers (one not written yet): the journal prunes only
	// what a checkpoint vouches for, so that a tombstone can be checked.
	ErrUncovered = errors.New("journal: entry not covered by a signed checkpoint")
	// ErrUnrecorded means Prune was asked for an entry that no
	// retention.prune entry of the journal names.
	ErrUnrecorded = errors.New("journal: entry to prune not named by a retention.prune entry")
)

// checkRecorded checks that the retention.prune entries at the seqs of
// record name every seq of seqs.
func (j *Journal) checkRecorded(seqs, record []uint64) error {
	var named []event.SeqRange
	for _, at := range record {
		if _, found := slices.BinarySearch(seqs, at); found {
			return fmt.Errorf("%w: entry %d is the record of this prune", ErrUnrecorded, at)
		}
		raw, err := Entry(j.dir, at)
		if err != nil {
			return fmt.Errorf("pruning: reading the record of the prune, entry %d: %w", at, err)
		}
		ranges, ok := pruneRecordRanges(raw)
		if !ok {
			return fmt.Errorf("%w: entry %d is not a retention.prune entry of the journal", ErrUnrecorded, at)
		}
		named = append(named, ranges...)
	}
	if seq, ok := firstUnnamed(named, event.SeqRanges(seqs)); ok {
		return fmt.Errorf("%w: entry %d", ErrUnrecorded, seq)
	}
	return nil
}

// pruneRecordMark is in the canonical encoding of every retention.prune
// event: entries without it are not decoded.
var pruneRecordMark = []byte(`"kind":"` + event.KindRetentionPrune + `"`)

// pruneRecordRanges returns the seq ranges that raw, an entry, names as
// pruned, and false unless it is a retention.prune event of the journal.
func pruneRecordRanges(raw []byte) ([]event.SeqRange, bool) {
	if !bytes.Contains(raw, pruneRecordMark) {
		return nil, false
	}
	e, err := event.Unmarshal(raw)
	if err != nil || e.Kind != event.KindRetentionPrune || e.Source != event.SourceJournal || e.Retention == nil {
		return nil, false
	}
	return e.Retention.Ranges, true
}

// firstUnnamed returns the first seq of want that no range of named
// holds, and false when named holds them all.
func firstUnnamed(named, want []event.SeqRange) (uint64, bool) {
	union := slices.Clone(named)
	slices.SortFunc(union, func(a, b event.SeqRange) int { return cmp.Compare(a.First, b.First) })
	for _, w := range want {
		next := w.First // the first seq of w not yet found named
		for _, u := range union {
			if u.First > next {
				break
			}
			if u.Last >= next {
				if u.Last >= w.Last {
					next = w.Last + 1
					break
				}
				next = u.Last + 1
			}
		}
		if next <= w.Last {
			return next, true
		}
	}
	return 0, false
}

// PrunedError is Entry's error for a pruned entry: what its tombstone
// keeps of it, the seq and the Merkle leaf hash.
type PrunedError struct {
	Seq  uint64
	Leaf tlog.Hash
}

func (e *PrunedError) Error() string {
	return fmt.Sprintf("journal: entry %d was pruned by the retention policy; its tombstone keeps only its leaf hash %s", e.Seq, e.Leaf)
}

// Is makes errors.Is(err, ErrPruned) hold.
func (e *PrunedError) Is(target error) bool { return target == ErrPruned }

// PruneResult says what Prune did.
type PruneResult struct {
	// Pruned counts the entries this call replaced with a tombstone.
	Pruned uint64 `json:"pruned"`
	// Already counts the entries asked for that were tombstones already.
	Already uint64 `json:"already"`
	// Segments counts the segment files rewritten.
	Segments int `json:"segments"`
	// Checkpoint is the size of the signed checkpoint that covers every
	// entry pruned.
	Checkpoint uint64 `json:"checkpoint"`
}

// pruneTempPrefix begins the name of a segment being rewritten. It does not
// begin with segPrefix, so that no reader takes it for a segment; Open
// removes what a crash left of one.
const pruneTempPrefix = ".prune-"

// Prune replaces the entries seqs with tombstones: each entry's frame is
// rewritten as a tombstone frame holding its seq and its Merkle leaf hash,
// so the tree, every checkpoint and every proof stay as they were, and
// Verify still recomputes and checks the whole tree. The event itself is
// gone.
//
// Prune first signs a checkpoint of everything durable and refuses (with
// ErrUncovered, pruning nothing) a seq that it does not cover. When an
// entry to prune is in the open segment, the writer first starts a new
// segment, so that only sealed segments, which the writer never writes
// again, are rewritten. Each affected segment is rewritten whole into a
// temporary file, synced, renamed over the segment, and the directory
// synced: a crash leaves the old segment or the new one. Readers (Scan,
// Verify) that opened the old file read it to its end. Before it writes a
// tombstone, Prune checks the entry against its leaf hash in the hash
// file, and refuses (ErrCorrupt, that segment untouched) an entry that
// does not match: pruning must not erase the evidence of tampering.
//
// Every tombstone must be vouched for by the record: record are the seqs
// of retention.prune entries (source journal), journaled before Prune is
// called, whose ranges name every seq pruned; Prune reads them back and
// refuses (ErrUnrecorded) a seq none names, and Verify calls a tombstone
// that no retention.prune entry names tampering. Someone who can write
// the journal's files but holds no key can compute a leaf hash, but not
// sign the record of a prune.
//
// Entries already pruned are counted in Already. One Prune runs at a time,
// and Close waits for it.
func (j *Journal) Prune(ctx context.Context, seqs, record []uint64) (PruneResult, error) {
	var res PruneResult
	seqs = slices.Compact(slices.Sorted(slices.Values(seqs)))
	if len(seqs) == 0 {
		return res, nil
	}
	j.pruneMu.Lock()
	defer j.pruneMu.Unlock()
	if err := j.checkRecorded(seqs, record); err != nil {
		return res, err
	}
	cp, err := j.Checkpoint(ctx)
	if err != nil {
		return res, fmt.Errorf("pruning: signing the checkpoint that covers the entries: %w", err)
	}
	res.Checkpoint = cp.Size
	if last := seqs[len(seqs)-1]; last >= cp.Size {
		return res, fmt.Errorf("%w: entry %d (the checkpoint covers %d entries)", ErrUncovered, last, cp.Size)
	}
	tail, err := j.sealThrough(ctx, seqs[len(seqs)-1])
	if err != nil {
		return res, fmt.Errorf("pruning: sealing the open segment: %w", err)
	}
	segs, err := listSegments(j.dir)
	if err != nil {
		return res, err
	}
	hr, err := OpenStoredHashes(j.dir, cp.Size)
	if err != nil {
		return res, fmt.Errorf("pruning: %w", err)
	}
	defer hr.Close()
	for i, s := range segs {
		if s.first >= tail {
			break
		}
		end := tail
		if i+1 < len(segs) {
			end = segs[i+1].first
		}
		lo, _ := slices.BinarySearch(seqs, s.first)
		hi, _ := slices.BinarySearch(seqs, end)
		if lo == hi {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		n, already, err := rewritePruned(j.dir, s, end, seqs[lo:hi], hr)
		if err != nil {
			return res, err
		}
		res.Pruned += n
		res.Already += already
		if n > 0 {
			res.Segments++
		}
		j.log.Info("pruned entries", "segment", filepath.Base(s.path), "entries", n)
	}
	return res, nil
}

// sealThrough makes sure entry seq is in a sealed segment: when the open
// segment holds it, the writer starts a new segment first. It returns the
// first seq of the open segment.
func (j *Journal) sealThrough(ctx context.Context, seq uint64) (uint64, error) {
	done := make(chan error, 1)
	var first uint64
	do := func() {
		if err := j.failure(); err != nil {
			done <- err
			return
		}
		if j.segFirst <= seq {
			if err := j.rotate(j.wsize); err != nil {
				done <- j.fail(err)
				return
			}
		}
		first = j.segFirst
		done <- nil
	}
	select {
	case j.ctl <- do:
	case <-j.closing:
		return 0, ErrClosed
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	err := <-done
	return first, err
}

// rewritePruned rewrites the sealed segment s, whose entries end before
// seq end, with tombstones in place of the entries seqs (sorted, all in the
// segment), and returns how many it pruned and how many were pruned
// already. hr gives the stored leaf hashes each entry is checked against.
func rewritePruned(dir string, s segment, end uint64, seqs []uint64, hr *StoredHashes) (pruned, already uint64, err error) {
	name := filepath.Base(s.path)
	tmp := filepath.Join(dir, pruneTempPrefix+name)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, 0, fmt.Errorf("pruning segment %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	pruned, already, err = copyPruned(w, s, end, seqs, hr)
	if err != nil {
		return 0, 0, err
	}
	if pruned == 0 { // every entry asked for was pruned already
		f.Close()
		os.Remove(tmp)
		return 0, already, nil
	}
	if err = w.Flush(); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	if err == nil {
		err = atomicfile.SyncDir(dir)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("pruning segment %s: %w", name, err)
	}
	return pruned, already, nil
}

// copyPruned writes the frames of segment s to w, tombstones in place of
// the entries seqs.
func copyPruned(w io.Writer, s segment, end uint64, seqs []uint64, hr *StoredHashes) (pruned, already uint64, err error) {
	name := filepath.Base(s.path)
	r, err := openSegmentReader(s.path, s.first)
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	x := newHasher()
	var buf []byte
	for {
		seq := r.seq
		p, err := r.next()
		if err == io.EOF {
			break
		}
		var fe *frameError
		if errors.As(err, &fe) {
			return 0, 0, fmt.Errorf("%w: pruning segment %s: %v (run sandtrail verify)", ErrCorrupt, name, fe)
		}
		if err != nil {
			return 0, 0, err
		}
		buf = buf[:0]
		switch {
		case r.pruned:
			if len(seqs) > 0 && seqs[0] == seq {
				already++
				seqs = seqs[1:]
			}
			buf = appendTombstone(buf, seq, tombstoneLeaf(p))
		case len(seqs) > 0 && seqs[0] == seq:
			seqs = seqs[1:]
			leaf := x.leaf(p)
			stored, err := hr.ReadHashes([]int64{tlog.StoredHashIndex(0, int64(seq))})
			if err != nil {
				return 0, 0, fmt.Errorf("pruning entry %d: %w", seq, err)
			}
			if stored[0] != leaf {
				return 0, 0, fmt.Errorf("%w: entry %d does not match its leaf hash in the hash file; segment %s not pruned (run sandtrail verify)", ErrCorrupt, seq, name)
			}
			buf = appendTombstone(buf, seq, leaf)
			pruned++
		default:
			buf = appendFrame(buf, p)
		}
		if _, err := w.Write(buf); err != nil {
			return 0, 0, fmt.Errorf("pruning segment %s: %w", name, err)
		}
	}
	if r.seq != end {
		return 0, 0, fmt.Errorf("%w: segment %s ends at seq %d, the next begins at %d (run sandtrail verify)", ErrCorrupt, name, r.seq, end)
	}
	if len(seqs) > 0 {
		return 0, 0, fmt.Errorf("pruning segment %s: entry %d is not in it", name, seqs[0])
	}
	return pruned, already, nil
}

// removePruneTemps removes what a crash left of segments being rewritten.
func removePruneTemps(dir string) error {
	names, err := filepath.Glob(filepath.Join(dir, pruneTempPrefix+"*"))
	if err != nil {
		return fmt.Errorf("listing pruned segments left by a crash: %w", err)
	}
	for _, n := range names {
		if err := os.Remove(n); err != nil {
			return fmt.Errorf("removing a pruned segment left by a crash: %w", err)
		}
	}
	return nil
}

// lastTombstone remembers the last tombstone that Open's checks of the
// segments read.
type lastTombstone struct {
	seq uint64
	ok  bool
}

// note records the frame r read last, if it is a tombstone.
func (t *lastTombstone) note(r *segmentReader) {
	if r.pruned {
		t.seq, t.ok = r.seq-1, true
	}
}

// covered checks that the latest checkpoint cp covers every tombstone:
// the journal prunes only covered entries, so one after cp was not written
// by Prune.
func (t *lastTombstone) covered(cp *Checkpoint) error {
	if !t.ok || cp != nil && t.seq < cp.Size {
		return nil
	}
	size := "no checkpoint"
	if cp != nil {
		size = "the latest checkpoint covers " + strconv.FormatUint(cp.Size, 10) + " entries"
	}
	return fmt.Errorf("%w: entry %d is a tombstone that no signed checkpoint covers (%s); the journal prunes only covered entries (run sandtrail verify)", ErrCorrupt, t.seq, size)
}

// frameLeaf is the Merkle leaf hash of a frame's payload p: the hash of the
// entry, or the one its tombstone keeps.
func frameLeaf(x *hasher, p []byte, pruned bool) tlog.Hash {
	if pruned {
		return tombstoneLeaf(p)
	}
	return x.leaf(p)
}
