package journal

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// baseFor is the checkpoint VerifyFrom(from) must start at: the newest of
// the fixture's stored checkpoints of size at most from, or 0.
func baseFor(from uint64) uint64 {
	base := uint64(0)
	for _, s := range tamperFixture.ckpts {
		if s <= from {
			base = s
		}
	}
	return base
}

func TestVerifyFromIntact(t *testing.T) {
	dir := tamperCopy(t)
	full, err := Verify(dir, tamperFixture.v, nil)
	if err != nil {
		t.Fatal(err)
	}
	ck := tamperFixture.ckpts
	for _, from := range []uint64{0, 1, ck[0] - 1, ck[0], ck[0] + 1, ck[1] + 100, tamperEntries - 1, tamperEntries, tamperEntries + 5} {
		rep, err := VerifyFrom(dir, tamperFixture.v, from)
		if err != nil || rep.Status != StatusIntact {
			t.Fatalf("VerifyFrom(%d) = %+v, %v, want intact", from, rep, err)
		}
		if rep.From != baseFor(from) {
			t.Errorf("VerifyFrom(%d).From = %d, want %d (checkpoints %v)", from, rep.From, baseFor(from), ck)
		}
		if rep.Entries != full.Entries || rep.Root != full.Root || rep.Covered != full.Covered {
			t.Errorf("VerifyFrom(%d) = %d entries, root %v, covered %d; Verify: %d, %v, %d",
				from, rep.Entries, rep.Root, rep.Covered, full.Entries, full.Root, full.Covered)
		}
		if segs := segmentsFrom(t, dir, baseFor(from)); rep.Segments != segs {
			t.Errorf("VerifyFrom(%d) read %d segments, want %d of %d", from, rep.Segments, segs, full.Segments)
		}
	}
}

// TestVerifyFromTampered: a change after the checkpoint VerifyFrom starts
// at is found at exactly the entry, as Verify finds it; a change before it
// is not read again (that is what a full Verify is for), and a hash file
// that does not match the checkpoint makes VerifyFrom a full Verify.
func TestVerifyFromTampered(t *testing.T) {
	buildTamperFixture(t)
	// A base in a later segment than entry 10's, with checkpoints after it.
	ck := tamperFixture.ckpts[len(tamperFixture.ckpts)-4:]
	from := ck[1] + 10
	tests := []struct {
		name     string
		edit     func(t *testing.T, dir string)
		firstBad int64 // -1: intact
		base     uint64
	}{
		{"entry after the base deleted", func(t *testing.T, dir string) {
			rewriteSegment(t, dir, int(ck[1])+50, func(f [][]byte, i int) [][]byte { return slices.Delete(f, i, i+1) })
		}, int64(ck[1]) + 50, ck[1]},
		{"entry after the base flipped", func(t *testing.T, dir string) {
			loc := frameLocs(t, dir)[ck[1]+3]
			b := mustReadFile(t, loc.path)
			b[loc.offset+loc.length-5] ^= 0x20
			mustWriteFile(t, loc.path, b)
		}, int64(ck[1]) + 3, ck[1]},
		{"later checkpoint forged", func(t *testing.T, dir string) {
			p := filepath.Join(dir, cpDir, checkpointName(ck[len(ck)-1]))
			b := mustReadFile(t, p)
			b[len(b)-10] ^= 1
			mustWriteFile(t, p, b)
		}, -2, ck[1]},
		{"entry of an earlier segment flipped (not read again)", func(t *testing.T, dir string) {
			if segmentsFrom(t, dir, 10) == segmentsFrom(t, dir, ck[1]) {
				t.Fatal("entry 10 is in the base's segment")
			}
			loc := frameLocs(t, dir)[10]
			b := mustReadFile(t, loc.path)
			b[loc.offset+loc.length-5] ^= 0x20
			mustWriteFile(t, loc.path, b)
		}, -1, ck[1]},
		{"latest older than the base (a crash before latest was stored)", func(t *testing.T, dir string) {
			old := mustReadFile(t, filepath.Join(dir, cpDir, checkpointName(ck[0])))
			mustWriteFile(t, filepath.Join(dir, cpDir, cpLatest), old)
		}, -1, ck[1]},
		{"hash file truncated: full verify", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, hashFile), 64); err != nil {
				t.Fatal(err)
			}
		}, -1, 0},
		{"base checkpoint badly signed: the one before", func(t *testing.T, dir string) {
			p := filepath.Join(dir, cpDir, checkpointName(ck[1]))
			b := mustReadFile(t, p)
			b[len(b)-10] ^= 1
			mustWriteFile(t, p, b)
		}, -2, ck[0]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tamperCopy(t)
			tt.edit(t, dir)
			rep, err := VerifyFrom(dir, tamperFixture.v, from)
			if rep == nil {
				t.Fatalf("VerifyFrom(%d) = nil, %v", from, err)
			}
			if rep.From != tt.base {
				t.Errorf("VerifyFrom(%d).From = %d, want %d", from, rep.From, tt.base)
			}
			switch {
			case tt.firstBad == -1:
				if err != nil || rep.Status != StatusIntact {
					t.Fatalf("VerifyFrom(%d) = %+v, %v, want intact", from, rep, err)
				}
			case !errors.Is(err, ErrTampered) || rep.Status != StatusTampered:
				t.Fatalf("VerifyFrom(%d) = %+v, %v, want tampered", from, rep, err)
			case tt.firstBad >= 0 && (rep.FirstBad == nil || *rep.FirstBad != uint64(tt.firstBad) || !rep.Exact):
				t.Fatalf("VerifyFrom(%d).FirstBad = %v (exact %v), want exactly %d (problems %v)", from, rep.FirstBad, rep.Exact, tt.firstBad, rep.Problems)
			}
		})
	}
}

// segmentsFrom counts the segments from the one holding entry seq to the
// last.
func segmentsFrom(t *testing.T, dir string, seq uint64) int {
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range segs {
		if i+1 == len(segs) || segs[i+1].first > seq {
			n++
		}
	}
	return n
}
