package journal

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// prunedJournal writes n entries in segments of about 16 KiB, prunes
// seqs, and closes the journal. It returns the original entries by seq and
// the journal's keys.
func prunedJournal(t *testing.T, dir string, n int, seqs []uint64) ([][]byte, note.Signer, note.Verifiers) {
	t.Helper()
	s, v := testKey(t, "prune")
	j, err := Open(dir, s, WithSegmentSize(16<<10), WithCheckpointEvery(64))
	if err != nil {
		t.Fatal(err)
	}
	evs := genEvents(n, 91)
	for len(evs) > 0 { // batches of 20, so that the segments rotate
		k := min(20, len(evs))
		if err := j.Append(context.Background(), evs[:k]...); err != nil {
			t.Fatal(err)
		}
		evs = evs[k:]
	}
	var orig [][]byte
	if err := Scan(dir, 0, func(_ uint64, raw []byte) error {
		orig = append(orig, bytes.Clone(raw))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	res, err := pruneRecorded(t, j, seqs...)
	if err != nil {
		t.Fatalf("Prune() = %v", err)
	}
	if res.Pruned != uint64(len(slices.Compact(slices.Sorted(slices.Values(seqs))))) || res.Already != 0 || res.Checkpoint != uint64(n)+1 {
		t.Fatalf("Prune() = %+v, want %d pruned, covered by a checkpoint of %d (the entries and the record)", res, len(seqs), n+1)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return orig, s, v
}

// reopen opens the journal in dir again with signer s.
func reopen(t *testing.T, dir string, s note.Signer) *Journal {
	t.Helper()
	j, err := Open(dir, s, WithSegmentSize(16<<10))
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	return j
}

// TestPruneKeepsTree prunes entries of sealed segments and of the open one
// (which Prune seals first), and checks that the journal still verifies,
// that readers skip the tombstones or name them, that proofs of pruned
// entries still verify, and that the journal reopens and grows.
func TestPruneKeepsTree(t *testing.T) {
	dir := t.TempDir()
	pruned := []uint64{0, 1, 2, 50, 51, 199, 298, 299}
	orig, s, v := prunedJournal(t, dir, 300, pruned)
	if segs, _ := listSegments(dir); len(segs) < 4 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	rep, err := Verify(dir, v, nil)
	if err != nil || rep.Status != StatusIntact || rep.Entries != 301 || rep.Pruned != uint64(len(pruned)) {
		t.Fatalf("Verify() after Prune = %+v, %v, want intact with 301 entries (300 and the record), %d pruned", rep, err, len(pruned))
	}
	j := reopen(t, dir, s)
	defer j.Close()
	var seen []uint64
	if err := Scan(dir, 0, func(seq uint64, raw []byte) error {
		if seq == 300 {
			return nil // the record of the prune
		}
		seen = append(seen, seq)
		if !bytes.Equal(raw, orig[seq]) {
			t.Errorf("Scan() entry %d changed", seq)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 300-len(pruned) || slices.ContainsFunc(seen, func(q uint64) bool { return slices.Contains(pruned, q) }) {
		t.Errorf("Scan() gave %d entries (%v...), want the %d unpruned", len(seen), seen[:min(5, len(seen))], 300-len(pruned))
	}
	var tombs []uint64
	if err := ScanAll(dir, 0, func(uint64, []byte) error { return nil }, func(seq uint64, leaf tlog.Hash) error {
		tombs = append(tombs, seq)
		if leaf != LeafHash(orig[seq]) {
			t.Errorf("ScanAll() tombstone %d keeps %s, want the entry's leaf hash", seq, leaf)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tombs, pruned) {
		t.Errorf("ScanAll() tombstones = %v, want %v", tombs, pruned)
	}
	_, err = Entry(dir, 50)
	var pe *PrunedError
	if !errors.Is(err, ErrPruned) || !errors.As(err, &pe) || pe.Seq != 50 || pe.Leaf != LeafHash(orig[50]) {
		t.Errorf("Entry(50) = %v, want a PrunedError with its leaf hash", err)
	}
	if raw, err := Entry(dir, 52); err != nil || !bytes.Equal(raw, orig[52]) {
		t.Errorf("Entry(52) = %v, want the entry", err)
	}
	cp, err := ReadCheckpoint(filepath.Join(dir, cpDir, cpLatest), v)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := Prove(dir, 51, cp)
	if err != nil {
		t.Fatalf("Prove(pruned 51) = %v", err)
	}
	if err := tlog.CheckRecord(proof, int64(cp.Size), cp.Root, 51, LeafHash(orig[51])); err != nil {
		t.Errorf("proof of pruned entry 51 does not verify: %v", err)
	}
	// Prune again: the tombstones stay, counted as already pruned.
	res, err := pruneRecorded(t, j, 51, 52)
	if err != nil || res.Pruned != 1 || res.Already != 1 {
		t.Errorf("Prune(51, 52) = %+v, %v, want 1 pruned and 1 already", res, err)
	}
	if err := j.Append(context.Background(), genEvents(10, 92)...); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err = Verify(dir, v, nil, DecodeEvents())
	if err != nil || rep.Status != StatusIntact || rep.Entries != 312 || rep.Pruned != uint64(len(pruned)+1) {
		t.Fatalf("Verify() after reopening = %+v, %v", rep, err)
	}
	if rep, err := VerifyFrom(dir, v, 200); err != nil || rep.Status != StatusIntact {
		t.Errorf("VerifyFrom(200) = %+v, %v", rep, err)
	}
}

// TestPruneRefusesUncovered checks that Prune refuses an entry beyond the
// durable tree and prunes nothing then.
func TestPruneRefusesUncovered(t *testing.T) {
	dir := t.TempDir()
	s, _ := testKey(t, "prune")
	j, err := Open(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := j.Prune(context.Background(), []uint64{0}, nil); err == nil {
		t.Fatal("Prune() of an empty journal = nil, want an error")
	}
	if err := j.Append(context.Background(), genEvents(5, 93)...); err != nil {
		t.Fatal(err)
	}
	if _, err := pruneRecorded(t, j, 1, 9); !errors.Is(err, ErrUncovered) {
		t.Fatalf("Prune(1, 9) = %v, want ErrUncovered", err)
	}
	if _, err := j.Prune(context.Background(), []uint64{1}, nil); !errors.Is(err, ErrUnrecorded) {
		t.Fatalf("Prune(1) with no record = %v, want ErrUnrecorded", err)
	}
	if _, err := j.Prune(context.Background(), []uint64{5}, []uint64{5}); !errors.Is(err, ErrUnrecorded) {
		t.Fatalf("Prune(5) of the record itself = %v, want ErrUnrecorded", err)
	}
	if _, err := Entry(dir, 1); err != nil {
		t.Errorf("Entry(1) after a refused Prune = %v, want it kept", err)
	}
}

// TestPruneRefusesTamperedEntry checks that Prune does not erase an entry
// whose bytes no longer match its leaf hash, the evidence of tampering.
func TestPruneRefusesTamperedEntry(t *testing.T) {
	dir := t.TempDir()
	s, v := testKey(t, "prune")
	j, err := Open(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(context.Background(), genEvents(20, 94)...); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Rewrite entry 3 with a valid frame but other bytes.
	locs := frameLocs(t, dir)
	b := mustReadFile(t, locs[3].path)
	raw, err := Entry(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	forged := bytes.Replace(raw, []byte(`"sandbox-7"`), []byte(`"sandbox-8"`), 1)
	frame := appendFrame(nil, forged)
	b = slices.Concat(b[:locs[3].offset], frame, b[locs[3].offset+locs[3].length:])
	mustWriteFile(t, locs[3].path, b)
	if _, err := pruneRecorded(t, j, 2, 3); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Prune() of a tampered entry = %v, want ErrCorrupt", err)
	}
	j.crash()
	if got, err := Entry(dir, 3); err != nil || !bytes.Equal(got, forged) {
		t.Errorf("Entry(3) = %v: the refused Prune changed the segment", err)
	}
	if _, err := Verify(dir, v, nil); !errors.Is(err, ErrTampered) {
		t.Errorf("Verify() = %v, want tampered", err)
	}
}

// TestPrunedTombstoneTampered forges tombstones: one whose leaf hash was
// changed, and one written in place of an entry no checkpoint covers.
func TestPrunedTombstoneTampered(t *testing.T) {
	tests := []struct {
		name string
		// edit changes the tombstone frame of seq 50 or the frame of an
		// uncovered entry.
		edit    func(t *testing.T, dir string) uint64
		openErr bool
	}{
		{"leaf hash changed", func(t *testing.T, dir string) uint64 {
			replaceFrame(t, dir, 50, appendTombstone(nil, 50, tlog.RecordHash([]byte("forged"))))
			return 50
		}, false},
		{"seq changed", func(t *testing.T, dir string) uint64 {
			replaceFrame(t, dir, 50, appendTombstone(nil, 51, tlog.RecordHash([]byte("forged"))))
			return 50
		}, true},
		{"entry 120 erased with its own leaf hash", func(t *testing.T, dir string) uint64 {
			raw, err := Entry(dir, 120)
			if err != nil {
				t.Fatal(err)
			}
			replaceFrame(t, dir, 120, appendTombstone(nil, 120, LeafHash(raw)))
			return 120
		}, true},
		{"a covered entry erased with its own leaf hash, which no record names", func(t *testing.T, dir string) uint64 {
			raw, err := Entry(dir, 10)
			if err != nil {
				t.Fatal(err)
			}
			replaceFrame(t, dir, 10, appendTombstone(nil, 10, LeafHash(raw)))
			return 10
		}, false},
		{"entry 100 erased with another leaf hash", func(t *testing.T, dir string) uint64 {
			replaceFrame(t, dir, 100, appendTombstone(nil, 100, tlog.RecordHash([]byte("x"))))
			return 100
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			_, s, v := prunedJournal(t, dir, 100, []uint64{50})
			j := reopen(t, dir, s)
			// 30 more entries that no checkpoint covers.
			if err := j.Append(context.Background(), genEvents(30, 95)...); err != nil {
				t.Fatal(err)
			}
			j.crash()
			seq := tt.edit(t, dir)
			rep, err := Verify(dir, v, nil)
			if !errors.Is(err, ErrTampered) || rep.FirstBad == nil || *rep.FirstBad != seq || !rep.Exact {
				t.Fatalf("Verify() = %+v, %v, want tampered at exactly %d", rep, err, seq)
			}
			jr, err := Open(dir, s)
			if tt.openErr && !errors.Is(err, ErrCorrupt) {
				t.Errorf("Open() = %v, want ErrCorrupt", err)
			}
			if err == nil {
				jr.crash()
			}
		})
	}
}

// replaceFrame replaces the frame of entry seq, keeping the frames around
// it.
func replaceFrame(t *testing.T, dir string, seq int, frame []byte) {
	t.Helper()
	l := frameLocs(t, dir)[seq]
	b := mustReadFile(t, l.path)
	mustWriteFile(t, l.path, slices.Concat(b[:l.offset], frame, b[l.offset+l.length:]))
}

// TestOpenRemovesPruneTemps checks that Open removes what a crash in the
// middle of a Prune left.
func TestOpenRemovesPruneTemps(t *testing.T) {
	dir := t.TempDir()
	_, s, v := prunedJournal(t, dir, 20, []uint64{3})
	tmp := filepath.Join(dir, pruneTempPrefix+segmentName(0))
	mustWriteFile(t, tmp, []byte("half a segment"))
	j := reopen(t, dir, s)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open() left %s: %v", tmp, err)
	}
	if rep, err := Verify(dir, v, nil); err != nil || rep.Pruned != 1 {
		t.Errorf("Verify() = %+v, %v", rep, err)
	}
}
