package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/event"
)

const tamperEntries = 10_000

// tamperFixture is a 10k-event journal built once, copied for each case.
var tamperFixture struct {
	once   sync.Once
	dir    string
	err    error
	signer note.Signer
	v      note.Verifiers
	held   []byte // the newest checkpoint, as shipped off-host
	ckpts  []uint64
}

func buildTamperFixture(t *testing.T) {
	t.Helper()
	f := &tamperFixture
	f.once.Do(func() {
		f.dir, f.err = os.MkdirTemp("", "journal-tamper-")
		if f.err != nil {
			return
		}
		skey, vkey, err := GenerateKey("sandtrail/tamper")
		if err != nil {
			f.err = err
			return
		}
		f.signer, _ = note.NewSigner(skey)
		vr, _ := note.NewVerifier(vkey)
		f.v = note.VerifierList(vr)
		// Small segments so that tampering hits several files; no timed
		// checkpoints so that the checkpoint sizes are deterministic.
		j, err := Open(f.dir, f.signer, WithSegmentSize(512<<10), WithCheckpointInterval(time.Hour))
		if err != nil {
			f.err = err
			return
		}
		evs := genEvents(tamperEntries, 99)
		for i := 0; i < len(evs); i += 64 {
			if err := j.Append(context.Background(), evs[i:min(i+64, len(evs))]...); err != nil {
				f.err = err
				return
			}
		}
		if f.err = j.Close(); f.err != nil {
			return
		}
		f.held, f.err = os.ReadFile(filepath.Join(f.dir, cpDir, cpLatest))
		files, _, _ := readCheckpoints(f.dir, nil)
		for _, c := range files {
			if c.name != cpLatest {
				f.ckpts = append(f.ckpts, c.size)
			}
		}
		slices.Sort(f.ckpts)
	})
	if f.err != nil {
		t.Fatal(f.err)
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		helperAppender()
		return
	}
	code := m.Run()
	if tamperFixture.dir != "" {
		os.RemoveAll(tamperFixture.dir)
	}
	os.Exit(code)
}

// tamperCopy returns a fresh copy of the fixture.
func tamperCopy(t *testing.T) string {
	buildTamperFixture(t)
	dir := t.TempDir()
	copyDir(t, tamperFixture.dir, dir)
	return dir
}

// wantTampered checks that Verify reports tampering at exactly firstBad
// (or, with firstBad < 0, tampering that no entry is to blame for).
func wantTampered(t *testing.T, dir string, held [][]byte, firstBad int64) *Report {
	t.Helper()
	rep, err := Verify(dir, tamperFixture.v, held)
	if !errors.Is(err, ErrTampered) {
		t.Fatalf("Verify() error = %v, want ErrTampered (report %+v)", err, rep)
	}
	if rep.Status != StatusTampered {
		t.Fatalf("Verify().Status = %s, want tampered", rep.Status)
	}
	switch {
	case firstBad < 0 && rep.FirstBad != nil:
		t.Fatalf("Verify().FirstBad = %d, want none (problems %v)", *rep.FirstBad, rep.Problems)
	case firstBad >= 0 && rep.FirstBad == nil:
		t.Fatalf("Verify().FirstBad = none, want %d (problems %v)", firstBad, rep.Problems)
	case firstBad >= 0 && (*rep.FirstBad != uint64(firstBad) || !rep.Exact):
		t.Fatalf("Verify().FirstBad = %d (exact %v), want exactly %d (problems %v)", *rep.FirstBad, rep.Exact, firstBad, rep.Problems)
	}
	return rep
}

func TestTamperIntact(t *testing.T) {
	dir := tamperCopy(t)
	rep, err := Verify(dir, tamperFixture.v, [][]byte{tamperFixture.held})
	if err != nil || rep.Status != StatusIntact {
		t.Fatalf("Verify(intact) = %+v, %v, want intact", rep, err)
	}
	if rep.Entries != tamperEntries || rep.Covered != tamperEntries || rep.Uncovered != 0 || rep.Held != 1 {
		t.Fatalf("Verify(intact) = %+v, want %d entries all covered, 1 held", rep, tamperEntries)
	}
	if len(tamperFixture.ckpts) < 4 || rep.Checkpoints != len(tamperFixture.ckpts)+2 {
		t.Fatalf("Verify(intact) checked %d checkpoints, fixture has %v (+latest +held)", rep.Checkpoints, tamperFixture.ckpts)
	}
	rep, err = Verify(dir, tamperFixture.v, nil, DecodeEvents())
	if err != nil || rep.Status != StatusIntact {
		t.Fatalf("Verify(intact, DecodeEvents) = %+v, %v, want intact", rep, err)
	}
}

// TestTamperFlipSegments flips one byte at many positions across frame
// headers and payloads of every segment; each flip is detected at exactly
// the entry whose frame holds the byte.
func TestTamperFlipSegments(t *testing.T) {
	buildTamperFixture(t)
	locs := frameLocs(t, tamperFixture.dir)
	if len(locs) != tamperEntries {
		t.Fatalf("fixture has %d frames, want %d", len(locs), tamperEntries)
	}
	r := rand.New(rand.NewPCG(7, 7))
	type flip struct {
		seq int
		at  int64 // offset within the frame
	}
	var flips []flip
	// Every header byte of a few entries, including the very first and last.
	for _, seq := range []int{0, 1, 4095, 4096, 5000, tamperEntries - 1} {
		for at := range int64(frameHeaderSize) {
			flips = append(flips, flip{seq, at})
		}
	}
	// Random header and payload bytes across all segments, and the first
	// and last entry of each segment.
	for range 120 {
		seq := r.IntN(tamperEntries)
		flips = append(flips, flip{seq, r.Int64N(locs[seq].length)})
	}
	for i := 1; i < len(locs); i++ {
		if locs[i].path != locs[i-1].path {
			flips = append(flips, flip{i - 1, locs[i-1].length - 1}, flip{i, 0}, flip{i, frameHeaderSize + 3})
		}
	}
	dir := t.TempDir()
	copyDir(t, tamperFixture.dir, dir)
	for _, f := range flips {
		t.Run(fmt.Sprintf("seq%d+%d", f.seq, f.at), func(t *testing.T) {
			loc := locs[f.seq]
			p := filepath.Join(dir, filepath.Base(loc.path))
			orig := mustReadFile(t, p)
			b := bytes.Clone(orig)
			bit := byte(1) << r.IntN(8)
			b[loc.offset+f.at] ^= bit
			mustWriteFile(t, p, b)
			defer mustWriteFile(t, p, orig)
			wantTampered(t, dir, nil, int64(f.seq))
			if j, err := Open(dir, tamperFixture.signer); err == nil {
				j.Close()
				t.Fatalf("Open() of a journal with a flipped byte = nil error, want refusal")
			}
		})
	}
	// The restored copy is intact again.
	if rep, err := Verify(dir, tamperFixture.v, nil); err != nil || rep.Status != StatusIntact {
		t.Fatalf("Verify(restored) = %+v, %v", rep, err)
	}
}

// TestTamperFlipCheckpoints flips bytes across every checkpoint file.
func TestTamperFlipCheckpoints(t *testing.T) {
	dir := tamperCopy(t)
	files, _, err := readCheckpoints(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(8, 8))
	for _, f := range files {
		p := filepath.Join(dir, cpDir, f.name)
		positions := []int{0, len(f.text) / 2, len(f.text) - 1, bytes.Index(f.text, []byte("\n\n")) + 1}
		for range 12 {
			positions = append(positions, r.IntN(len(f.text)))
		}
		for _, pos := range positions {
			t.Run(fmt.Sprintf("%s@%d", f.name, pos), func(t *testing.T) {
				b := bytes.Clone(f.text)
				b[pos] ^= byte(1) << r.IntN(8)
				mustWriteFile(t, p, b)
				defer mustWriteFile(t, p, f.text)
				rep := wantTampered(t, dir, nil, -1)
				if rep.Problems[0].File != filepath.Join(cpDir, f.name) {
					t.Fatalf("Verify() blames %v, want %s", rep.Problems[0], f.name)
				}
			})
		}
	}
	// A flipped held checkpoint is detected too.
	for _, pos := range []int{3, 40, len(tamperFixture.held) - 5} {
		b := bytes.Clone(tamperFixture.held)
		b[pos] ^= 0x20
		rep := wantTampered(t, dir, [][]byte{b}, -1)
		if rep.Problems[0].File != "held[0]" {
			t.Fatalf("Verify() blames %v, want held[0]", rep.Problems[0])
		}
	}
}

// rewriteSegment applies edit to the frames of the segment holding seq.
func rewriteSegment(t *testing.T, dir string, seq int, edit func(frames [][]byte, i int) [][]byte) {
	t.Helper()
	locs := frameLocs(t, dir)
	p := locs[seq].path
	b := mustReadFile(t, p)
	var frames [][]byte
	idx := -1
	for s, l := range locs {
		if l.path == p {
			if s == seq {
				idx = len(frames)
			}
			frames = append(frames, b[l.offset:l.offset+l.length])
		}
	}
	mustWriteFile(t, p, bytes.Join(edit(frames, idx), nil))
}

func TestTamperEntries(t *testing.T) {
	buildTamperFixture(t)
	fixLocs := frameLocs(t, tamperFixture.dir)
	boundary := 0 // the first entry of a segment past 3000
	for s := 3001; s < len(fixLocs); s++ {
		if fixLocs[s].path != fixLocs[s-1].path {
			boundary = s
			break
		}
	}
	if boundary == 0 {
		t.Fatal("fixture has no segment boundary past 3000")
	}
	forge := func(seq uint64) []byte {
		ev := genEvents(1, 1234)[0]
		ev.V, ev.Seq = event.SchemaVersion, seq
		raw, err := event.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return appendFrame(nil, raw)
	}
	tests := []struct {
		name     string
		edit     func(t *testing.T, dir string)
		held     bool
		firstBad int64
		openOK   bool // Open checks framing, not the Merkle tree or held checkpoints
	}{
		{"delete entry", func(t *testing.T, dir string) {
			rewriteSegment(t, dir, 6000, func(f [][]byte, i int) [][]byte { return slices.Delete(f, i, i+1) })
		}, false, 6000, false},
		{"delete first entry of a segment", func(t *testing.T, dir string) {
			rewriteSegment(t, dir, boundary, func(f [][]byte, i int) [][]byte { return slices.Delete(f, i, i+1) })
		}, false, int64(boundary), false},
		{"swap entries across segments", func(t *testing.T, dir string) {
			a := frameLocs(t, dir)[boundary-1]
			b := frameLocs(t, dir)[boundary]
			sa, sb := mustReadFile(t, a.path), mustReadFile(t, b.path)
			fa := bytes.Clone(sa[a.offset : a.offset+a.length])
			fb := bytes.Clone(sb[b.offset : b.offset+b.length])
			mustWriteFile(t, a.path, append(sa[:a.offset:a.offset], fb...))
			mustWriteFile(t, b.path, append(fa, sb[b.length:]...))
		}, false, int64(boundary - 1), false},
		{"swap two entries", func(t *testing.T, dir string) {
			rewriteSegment(t, dir, 7777, func(f [][]byte, i int) [][]byte { f[i], f[i+1] = f[i+1], f[i]; return f })
		}, false, 7777, false},
		{"insert entry with the right seq", func(t *testing.T, dir string) {
			rewriteSegment(t, dir, 2500, func(f [][]byte, i int) [][]byte { return slices.Insert(f, i+1, forge(2501)) })
		}, false, 2501, false},
		{"rewrite entry with a valid frame", func(t *testing.T, dir string) {
			rewriteSegment(t, dir, 5555, func(f [][]byte, i int) [][]byte { f[i] = forge(5555); return f })
		}, false, 5555, true},
		{"append forged entry breaking seq", func(t *testing.T, dir string) {
			rewriteSegment(t, dir, tamperEntries-1, func(f [][]byte, i int) [][]byte { return append(f, forge(tamperEntries+5)) })
		}, false, tamperEntries, false},
		{"delete a segment", func(t *testing.T, dir string) {
			segs, _ := listSegments(dir)
			os.Remove(segs[2].path)
		}, false, -3, false},
		{"truncate below held checkpoint", func(t *testing.T, dir string) {
			locs := frameLocs(t, dir)
			l := locs[9000]
			if err := os.Truncate(l.path, l.offset); err != nil {
				t.Fatal(err)
			}
			segs, _ := listSegments(dir)
			for _, s := range segs {
				if s.first > 9000 {
					os.Remove(s.path)
				}
			}
			// The attacker also removes every checkpoint above 9000.
			files, _, _ := readCheckpoints(dir, nil)
			var best []byte
			var bestSize uint64
			for _, c := range files {
				if c.name == cpLatest || c.size > 9000 {
					os.Remove(filepath.Join(dir, cpDir, c.name))
				} else if c.size >= bestSize {
					best, bestSize = c.text, c.size
				}
			}
			mustWriteFile(t, filepath.Join(dir, cpDir, cpLatest), best)
			// Without the held checkpoint this looks like an uncovered tail.
			rep, err := Verify(dir, tamperFixture.v, nil)
			if err != nil || rep.Status != StatusUncovered || rep.Entries != 9000 {
				t.Fatalf("Verify(truncated, no held) = %+v, %v, want uncovered at 9000", rep, err)
			}
		}, true, 9000, true},
		{"truncate mid-frame below checkpoint", func(t *testing.T, dir string) {
			l := frameLocs(t, dir)[tamperEntries-1]
			if err := os.Truncate(l.path, l.offset+l.length-3); err != nil {
				t.Fatal(err)
			}
		}, false, tamperEntries - 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tamperCopy(t)
			tt.edit(t, dir)
			var held [][]byte
			if tt.held {
				held = [][]byte{tamperFixture.held}
			}
			switch tt.firstBad {
			case -3: // a deleted segment: the first missing seq
				segs, _ := listSegments(tamperFixture.dir)
				wantTampered(t, dir, held, int64(segs[2].first))
			default:
				wantTampered(t, dir, held, tt.firstBad)
			}
			j, err := Open(dir, tamperFixture.signer)
			if err == nil {
				j.Close()
				if !tt.openOK {
					t.Fatalf("Open() of a tampered journal = nil error, want refusal")
				}
				// Whatever Open accepted, Verify still reports.
				wantTampered(t, dir, held, tt.firstBad)
			}
		})
	}
}

// TestTamperLocateNeedsHashFile shows that when the attacker also rebuilds
// the hash file, a rewritten (validly framed) entry is still detected but
// only located to the range after the last matching checkpoint.
func TestTamperLocateNeedsHashFile(t *testing.T) {
	dir := tamperCopy(t)
	ev := genEvents(1, 4321)[0]
	ev.V, ev.Seq = event.SchemaVersion, 5555
	raw, _ := event.Marshal(ev)
	rewriteSegment(t, dir, 5555, func(f [][]byte, i int) [][]byte { f[i] = appendFrame(nil, raw); return f })
	// Rebuild the hash file from the tampered entries.
	os.Remove(filepath.Join(dir, hashFile))
	hf, _ := os.Create(filepath.Join(dir, hashFile))
	x, e := newHasher(), &edge{}
	Scan(dir, 0, func(seq uint64, raw []byte) error {
		for _, h := range e.append(x, x.leaf(raw), nil) {
			hf.Write(h[:])
		}
		return nil
	})
	hf.Close()
	rep, err := Verify(dir, tamperFixture.v, nil)
	if !errors.Is(err, ErrTampered) || rep.FirstBad == nil || rep.Exact {
		t.Fatalf("Verify() = %+v, %v, want tampered, not exact", rep, err)
	}
	var prev uint64
	for _, c := range tamperFixture.ckpts {
		if c <= 5555 {
			prev = c
		}
	}
	if *rep.FirstBad != prev {
		t.Fatalf("Verify().FirstBad = %d, want %d (the last matching checkpoint)", *rep.FirstBad, prev)
	}
}

func TestTamperCheckpointKeys(t *testing.T) {
	attacker, _ := testKey(t, "sandtrail/tamper") // same name, other key
	tests := []struct {
		name string
		edit func(t *testing.T, dir string)
		held bool
	}{
		{"re-signed with another key", func(t *testing.T, dir string) {
			files, _, _ := readCheckpoints(dir, nil)
			for _, c := range files {
				cp, err := parseUnverified(c.text)
				if err != nil {
					t.Fatal(err)
				}
				re, err := signCheckpoint(attacker, cp.Origin, cp.Size, cp.Root)
				if err != nil {
					t.Fatal(err)
				}
				mustWriteFile(t, filepath.Join(dir, cpDir, c.name), re.Text)
			}
		}, false},
		{"countersigned by an unknown key", func(t *testing.T, dir string) {
			p := filepath.Join(dir, cpDir, cpLatest)
			n, err := note.Open(mustReadFile(t, p), tamperFixture.v)
			if err != nil {
				t.Fatal(err)
			}
			b, err := note.Sign(n, attacker)
			if err != nil {
				t.Fatal(err)
			}
			mustWriteFile(t, p, b)
		}, false},
		{"truncated and re-signed to match", func(t *testing.T, dir string) {
			locs := frameLocs(t, dir)
			os.Truncate(locs[9500].path, locs[9500].offset)
			files, _, _ := readCheckpoints(dir, nil)
			for _, c := range files {
				os.Remove(filepath.Join(dir, cpDir, c.name))
			}
			e, x := &edge{}, newHasher()
			Scan(dir, 0, func(seq uint64, raw []byte) error { e.appendLeaf(x, x.leaf(raw)); return nil })
			cp, _ := signCheckpoint(attacker, "sandtrail/tamper", e.n, e.root(x))
			storeCheckpoint(dir, cp)
		}, true},
		{"renamed checkpoint file", func(t *testing.T, dir string) {
			c := tamperFixture.ckpts[0]
			os.Rename(filepath.Join(dir, cpDir, checkpointName(c)), filepath.Join(dir, cpDir, checkpointName(c+1)))
		}, false},
		{"stray file among checkpoints", func(t *testing.T, dir string) {
			mustWriteFile(t, filepath.Join(dir, cpDir, "forged"), tamperFixture.held)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tamperCopy(t)
			tt.edit(t, dir)
			var held [][]byte
			if tt.held {
				held = [][]byte{tamperFixture.held}
			}
			rep, err := Verify(dir, tamperFixture.v, held)
			if !errors.Is(err, ErrTampered) || rep.Status != StatusTampered {
				t.Fatalf("Verify() = %+v, %v, want tampered", rep, err)
			}
			t.Logf("%v", err)
		})
	}
}

// TestTamperAppendedForgery: a well-framed entry with the next seq appended
// after the newest checkpoint is not provably forged, so Verify reports it
// as uncovered (not intact), naming how many entries no signature covers.
func TestTamperAppendedForgery(t *testing.T) {
	dir := tamperCopy(t)
	ev := genEvents(1, 555)[0]
	ev.V, ev.Seq = event.SchemaVersion, tamperEntries
	raw, _ := event.Marshal(ev)
	rewriteSegment(t, dir, tamperEntries-1, func(f [][]byte, i int) [][]byte { return append(f, appendFrame(nil, raw)) })
	rep, err := Verify(dir, tamperFixture.v, [][]byte{tamperFixture.held})
	if err != nil || rep.Status != StatusUncovered || rep.Uncovered != 1 || rep.Covered != tamperEntries {
		t.Fatalf("Verify(appended forgery) = %+v, %v, want uncovered 1 after %d", rep, err, tamperEntries)
	}
}

// TestTamperHashFileIgnored: the hash file is derived data that Verify
// never trusts, so garbling it leaves an intact journal intact.
func TestTamperHashFileIgnored(t *testing.T) {
	dir := tamperCopy(t)
	p := filepath.Join(dir, hashFile)
	b := mustReadFile(t, p)
	for i := 0; i < len(b); i += 997 {
		b[i] ^= 0xa5
	}
	mustWriteFile(t, p, b)
	rep, err := Verify(dir, tamperFixture.v, [][]byte{tamperFixture.held})
	if err != nil || rep.Status != StatusIntact {
		t.Fatalf("Verify() with a garbled hash file = %+v, %v, want intact", rep, err)
	}
	os.Remove(p)
	rep, err = Verify(dir, tamperFixture.v, nil)
	if err != nil || rep.Status != StatusIntact {
		t.Fatalf("Verify() without a hash file = %+v, %v, want intact", rep, err)
	}
}
