package journal

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// fuzzKey is a fixed key so that seed checkpoints in testdata verify.
const fuzzSKey = "PRIVATE+KEY+fuzz+c3447d26+AZfDHX6nyIImTlcZ8Z+nu+SSVM+6iFEKtZxn4yd1XQgs"

func fuzzKeys(t testing.TB) (note.Signer, note.Verifiers) {
	s, err := note.NewSigner(fuzzSKey)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := VerifierKey(fuzzSKey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, note.VerifierList(v)
}

// FuzzSegment treats arbitrary bytes as the only segment of a journal.
// Scan must not fail on a torn tail, Verify must not panic, and whatever
// Open accepts it must leave as a journal that verifies as intact.
func FuzzSegment(f *testing.F) {
	s, _ := fuzzKeys(f)
	seed := f.TempDir()
	j, err := Open(seed, s)
	if err != nil {
		f.Fatal(err)
	}
	if err := j.Append(context.Background(), genEvents(3, 77)...); err != nil {
		f.Fatal(err)
	}
	j.crash()
	good := mustReadFile(f, filepath.Join(seed, segmentName(0)))
	f.Add(good)
	f.Add(good[:len(good)-7])
	f.Add(append(bytes.Clone(good), 0, 0, 0, 0, 0, 0, 0, 0, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		s, v := fuzzKeys(t)
		dir := t.TempDir()
		mustWriteFile(t, filepath.Join(dir, segmentName(0)), data)
		n, m := 0, 0 // entries and tombstones
		err := ScanAll(dir, 0, func(seq uint64, raw []byte) error {
			if seq != uint64(n+m) {
				t.Fatalf("ScanAll gave seq %d at position %d", seq, n+m)
			}
			if got, ok := payloadSeq(raw); !ok || got != seq {
				t.Fatalf("ScanAll gave entry %d holding seq %d, %v", seq, got, ok)
			}
			n++
			return nil
		}, func(seq uint64, _ tlog.Hash) error {
			if seq != uint64(n+m) {
				t.Fatalf("ScanAll gave tombstone %d at position %d", seq, n+m)
			}
			m++
			return nil
		})
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("ScanAll() = %v, want nil or ErrCorrupt", err)
		}
		rep, verr := Verify(dir, v, nil)
		if verr != nil && !errors.Is(verr, ErrTampered) {
			t.Fatalf("Verify() = %v", verr)
		}
		// No checkpoint covers anything here, so a tombstone is tampering.
		if (err == nil && m == 0) != (rep.Status != StatusTampered) {
			t.Fatalf("ScanAll() = %v with %d tombstones but Verify() status %s", err, m, rep.Status)
		}
		if err == nil && (rep.Entries != uint64(n+m) || rep.Pruned != uint64(m)) {
			t.Fatalf("ScanAll() read %d entries and %d tombstones, Verify() %d and %d", n, m, rep.Entries, rep.Pruned)
		}
		jr, err := Open(dir, s)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open() = %v, want nil or ErrCorrupt", err)
			}
			return
		}
		if m > 0 {
			t.Fatalf("Open() accepted %d tombstones no checkpoint covers", m)
		}
		if err := jr.Close(); err != nil {
			t.Fatal(err)
		}
		rep, err = Verify(dir, v, nil)
		if err != nil || rep.Status != StatusIntact {
			t.Fatalf("Verify() after Open and Close = %+v, %v, want intact", rep, err)
		}
	})
}

// prunedTemplate builds, in dir, a journal of 12 entries and the record of
// their prune (seq 12) in one segment, covered by signed checkpoints,
// whose entries 3, 4 and 9 are pruned. Its
// keys, events and checkpoints are fixed, so it is the same journal every
// time. It returns the original entries by seq.
func prunedTemplate(t testing.TB, dir string) [][]byte {
	s, _ := fuzzKeys(t)
	j, err := Open(dir, s, WithCheckpointEvery(4), WithHost("fuzz"), WithSegmentSize(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(context.Background(), genEvents(12, 79)...); err != nil {
		t.Fatal(err)
	}
	var orig [][]byte
	if err := Scan(dir, 0, func(_ uint64, raw []byte) error {
		orig = append(orig, bytes.Clone(raw))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := pruneRecorded(t, j, 3, 4, 9); err != nil {
		t.Fatal(err)
	}
	record, err := Entry(dir, 12)
	if err != nil {
		t.Fatal(err)
	}
	orig = append(orig, record)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// Prune sealed the one segment; the journal goes on in an empty one,
	// which the fuzzer's journal does not have.
	if err := os.Remove(filepath.Join(dir, segmentName(13))); err != nil {
		t.Fatal(err)
	}
	return orig
}

// FuzzPrunedSegment puts arbitrary bytes in place of the one segment of a
// pruned journal whose checkpoints cover it (prunedTemplate). Verify must
// not panic, and whenever it calls the journal intact, every entry must be
// the original one and every tombstone keep the original's leaf hash: no
// forged entry or tombstone matches the signed tree.
func FuzzPrunedSegment(f *testing.F) {
	tmpl := f.TempDir()
	orig := prunedTemplate(f, tmpl)
	seg := mustReadFile(f, filepath.Join(tmpl, segmentName(0)))
	f.Add(seg)
	f.Add(seg[:len(seg)-5])
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		_, v := fuzzKeys(t)
		dir := t.TempDir()
		copyDir(t, tmpl, dir)
		mustWriteFile(t, filepath.Join(dir, segmentName(0)), data)
		rep, err := Verify(dir, v, nil)
		if err != nil && !errors.Is(err, ErrTampered) {
			t.Fatalf("Verify() = %v", err)
		}
		if rep.Status != StatusIntact {
			return
		}
		err = ScanAll(dir, 0, func(seq uint64, raw []byte) error {
			if seq >= uint64(len(orig)) || !bytes.Equal(raw, orig[seq]) {
				t.Fatalf("Verify() intact, but entry %d is not the original", seq)
			}
			return nil
		}, func(seq uint64, leaf tlog.Hash) error {
			if seq >= uint64(len(orig)) || leaf != LeafHash(orig[seq]) {
				t.Fatalf("Verify() intact, but tombstone %d keeps another leaf hash", seq)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Verify() intact, but ScanAll() = %v", err)
		}
	})
}

// FuzzParseCheckpoint parses arbitrary checkpoint notes. Whatever parses
// must round-trip through checkpointBody when it has no extension lines.
func FuzzParseCheckpoint(f *testing.F) {
	s, v := fuzzKeys(f)
	cp, err := signCheckpoint(s, "sandtrail/fuzz", 4096, tlog.RecordHash([]byte("x")))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(cp.Text)
	f.Add([]byte("sandtrail/fuzz\n1\nAAAA\n\n— fuzz AAAA\n"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		cp, err := ParseCheckpoint(msg, v)
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) && !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrBadSignature) {
				t.Fatalf("ParseCheckpoint() = %v, want a journal error", err)
			}
			return
		}
		body := checkpointBody(cp.Origin, cp.Size, cp.Root)
		if !bytes.HasPrefix(msg, []byte(body)) {
			t.Fatalf("ParseCheckpoint(%q) = %+v, which does not re-encode to a prefix (%q)", msg, cp, body)
		}
		uv, err := parseUnverified(msg)
		if err != nil || uv.Size != cp.Size || uv.Root != cp.Root || uv.Origin != cp.Origin {
			t.Fatalf("parseUnverified() = %+v, %v, want %+v", uv, err, cp)
		}
	})
}

var seqRE = regexp.MustCompile(`^\{"v":([0-9]{1,9}),"seq":(0|[1-9][0-9]{0,18}),`)

// FuzzPayloadSeq compares the fast seq reader with a regexp.
func FuzzPayloadSeq(f *testing.F) {
	f.Add([]byte(`{"v":1,"seq":0,"ts":"x"}`))
	f.Add([]byte(`{"v":1,"seq":18446744073709551615,`))
	f.Add([]byte(`{"v":1,"seq":012,`))
	f.Fuzz(func(t *testing.T, p []byte) {
		got, ok := payloadSeq(p)
		m := seqRE.FindSubmatch(p)
		if m == nil {
			if ok {
				t.Fatalf("payloadSeq(%q) = %d, true, want false", p, got)
			}
			return
		}
		want, err := strconv.ParseUint(string(m[2]), 10, 64)
		if err != nil { // out of range for uint64
			if ok {
				t.Fatalf("payloadSeq(%q) = %d, true, want false (overflow)", p, got)
			}
			return
		}
		if !ok || got != want {
			t.Fatalf("payloadSeq(%q) = %d, %v, want %d", p, got, ok, want)
		}
	})
}

var update = flag.Bool("update", false, "rewrite the fuzz seed corpora in testdata/fuzz")

// TestFuzzSeeds writes (with -update) or checks the seed corpora in
// testdata/fuzz: real segments, torn and garbled, and real checkpoints.
func TestFuzzSeeds(t *testing.T) {
	s, v := fuzzKeys(t)
	if s.Name() != "fuzz" {
		t.Fatalf("fuzz key name = %q", s.Name())
	}
	dir := t.TempDir()
	j, err := Open(dir, s, WithCheckpointEvery(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(context.Background(), genEvents(5, 78)...); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	seg := mustReadFile(t, filepath.Join(dir, segmentName(0)))
	cp := mustReadFile(t, filepath.Join(dir, cpDir, cpLatest))
	if _, err := ParseCheckpoint(cp, v); err != nil {
		t.Fatal(err)
	}
	first := frameHeaderSize + int(binary.LittleEndian.Uint32(seg))
	locs := frameLocs(t, dir)
	last := int(locs[len(locs)-1].offset)
	flipped := bytes.Clone(seg)
	flipped[len(flipped)/2] ^= 4
	tmpl := t.TempDir()
	prunedTemplate(t, tmpl)
	pseg := mustReadFile(t, filepath.Join(tmpl, segmentName(0)))
	plocs := frameLocs(t, tmpl)
	forged := bytes.Clone(pseg)
	forged[plocs[3].offset+frameHeaderSize+8] ^= 1 // the leaf hash of tombstone 3
	unflagged := bytes.Clone(pseg)
	unflagged[plocs[4].offset+3] &^= 0x80 // tombstone 4 without its flag
	seeds := map[string][][]byte{
		"FuzzSegment/pruned":               {pseg},
		"FuzzPrunedSegment/pruned":         {pseg},
		"FuzzPrunedSegment/forged-leaf":    {forged},
		"FuzzPrunedSegment/unflagged":      {unflagged},
		"FuzzPrunedSegment/torn-tombstone": {pseg[:plocs[9].offset+20]},
		"FuzzSegment/real":                 {seg},
		"FuzzSegment/torn-header":          {seg[:last+3]},
		"FuzzSegment/torn-payload":         {seg[:len(seg)-40]},
		"FuzzSegment/zero-tail":            {append(bytes.Clone(seg), make([]byte, 100)...)},
		"FuzzSegment/flipped-middle":       {flipped},
		"FuzzSegment/one-frame":            {seg[:first]},
		"FuzzParseCheckpoint/real":         {cp},
		"FuzzParseCheckpoint/nosig":        {[]byte("sandtrail/fuzz\n5\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n\n")},
		"FuzzParseCheckpoint/ext":          {[]byte("o\n1\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\nextension\n\n— fuzz AAAAAAA=\n")},
		"FuzzPayloadSeq/canonical":         {[]byte(`{"v":1,"seq":42,"ts":"2026-11-29T08:00:00Z"}`)},
		"FuzzPayloadSeq/leading-zero":      {[]byte(`{"v":1,"seq":042,`)},
		"FuzzPayloadSeq/overflow":          {[]byte(`{"v":1,"seq":18446744073709551616,`)},
	}
	for name, args := range seeds {
		p := filepath.Join("testdata", "fuzz", name)
		var b bytes.Buffer
		b.WriteString("go test fuzz v1\n")
		for _, a := range args {
			b.WriteString("[]byte(" + strconv.Quote(string(a)) + ")\n")
		}
		if *update {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("seed %s missing (run go test -run TestFuzzSeeds -update): %v", p, err)
		}
	}
}
