package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// Limits on what Parse reads from untrusted bytes.
const (
	// MaxBundleSize bounds a bundle's uncompressed tar.
	MaxBundleSize = 1 << 30
	// MaxEntries bounds the entries of one bundle.
	MaxEntries = 1 << 22
	// maxCheckpointSize is the journal's own bound on a checkpoint note.
	maxCheckpointSize = 64 << 10
	// maxManifestSize bounds the manifest: about 50 bytes per leaf hash.
	maxManifestSize = 64*MaxEntries + 64<<10
)

// part is one file of the tar, with its size limit.
type part struct {
	name  string
	limit int64
}

// layout is the bundle's tar, in order: nothing more, nothing less.
var layout = []part{
	{manifestName, maxManifestSize},
	{checkpointName, maxCheckpointSize},
	{entriesName, MaxBundleSize},
	{proofsName, MaxBundleSize},
}

// digestOf returns "sha256:<hex>" of b.
func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// gzipHeader is the gzip member header encode writes: deflate, no flags
// (no name, comment or extra field), no time, best compression, OS
// unknown.
const gzipHeader = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"

// encode writes the bundle file of m and its parts: a gzip stream
// (gzipHeader) of the tar that writeTar makes, so that the same parts
// always give the same bytes.
func encode(m *Manifest, checkpoint, entries, proofs []byte) ([]byte, error) {
	man, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding manifest: %w", err)
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("compressing bundle: %w", err)
	}
	if err := writeTar(zw, m.Created, [][]byte{man, checkpoint, entries, proofs}); err != nil {
		return nil, fmt.Errorf("writing bundle: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing bundle: %w", err)
	}
	return buf.Bytes(), nil
}

// writeTar writes the bundle's USTAR tar of files, in layout order, each
// with mode 0644, owner 0 and the time created (to the second).
func writeTar(w io.Writer, created time.Time, files [][]byte) error {
	tw := tar.NewWriter(w)
	mtime := created.UTC().Truncate(time.Second)
	for i, data := range files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: layout[i].name, Mode: 0o644, Size: int64(len(data)),
			ModTime: mtime, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// Parse reads a bundle file from untrusted bytes. It checks the layout
// only: one gzip stream with the header encode writes, and in it a tar of
// exactly the four files in order, each a regular file within its size
// limit, and byte for byte the tar that writeTar makes of them (so that no
// header field is left unchecked); a manifest and a
// proofs file that decode strictly (no unknown fields, no trailing data);
// and as many entry lines and proofs as the manifest's seqs name. Errors
// wrap ErrMalformed. Parse checks no hash or signature: call Verify.
func Parse(data []byte) (*Bundle, error) {
	files, tarSum, err := untar(data)
	if err != nil {
		return nil, err
	}
	b := &Bundle{data: data, digest: digestOf(data), Checkpoint: files[1], entries: files[2], proofs: files[3]}
	if err := event.DecodeStrict(files[0], &b.Manifest); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, manifestName, err)
	}
	canonical := sha256.New()
	if err := writeTar(canonical, b.Manifest.Created, files); err != nil || !bytes.Equal(canonical.Sum(nil), tarSum) {
		return nil, fmt.Errorf("%w: the tar's headers are not the ones a bundle's files have (mode 0644, owner 0, the manifest's created time)", ErrMalformed)
	}
	// Count before expanding the ranges: a manifest's count costs nothing
	// to claim, the entries it names do.
	if n := bytes.Count(files[2], []byte{'\n'}); n != b.Manifest.Entries {
		return nil, fmt.Errorf("%w: %s holds %d lines, the manifest names %d entries", ErrMalformed, entriesName, n, b.Manifest.Entries)
	}
	seqs, err := expand(b.Manifest.Seqs, b.Manifest.Entries)
	if err != nil {
		return nil, err
	}
	if b.Entries, err = splitEntries(files[2], seqs); err != nil {
		return nil, err
	}
	if err := event.DecodeStrict(files[3], &b.Proofs); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, proofsName, err)
	}
	if len(b.Proofs) != len(seqs) {
		return nil, fmt.Errorf("%w: %s holds %d proofs for %d entries", ErrMalformed, proofsName, len(b.Proofs), len(seqs))
	}
	return b, nil
}

// untar decompresses data and returns the contents of the layout's files
// and the sha256 of the whole tar.
func untar(data []byte) ([][]byte, []byte, error) {
	if !bytes.HasPrefix(data, []byte(gzipHeader)) {
		return nil, nil, fmt.Errorf("%w: not a bundle's gzip header (deflate, no flags, no time, best compression, OS unknown)", ErrMalformed)
	}
	src := bytes.NewReader(data)
	zr, err := gzip.NewReader(src)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: not gzip: %v", ErrMalformed, err)
	}
	zr.Multistream(false)
	sum := sha256.New()
	budget := &limitedReader{r: io.TeeReader(zr, sum), n: MaxBundleSize}
	tr := tar.NewReader(budget)
	files := make([][]byte, len(layout))
	for i, p := range layout {
		h, err := tr.Next()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: reading %s: %v", ErrMalformed, p.name, err)
		}
		if h.Name != p.name || h.Typeflag != tar.TypeReg {
			return nil, nil, fmt.Errorf("%w: file %d is %q (type %q), want the regular file %s", ErrMalformed, i+1, event.Clip(h.Name, 64), h.Typeflag, p.name)
		}
		if h.Size < 0 || h.Size > p.limit || h.Size > budget.n {
			return nil, nil, fmt.Errorf("%w: %s is %d bytes, over its limit", ErrMalformed, p.name, h.Size)
		}
		files[i] = make([]byte, h.Size)
		if _, err := io.ReadFull(tr, files[i]); err != nil {
			return nil, nil, fmt.Errorf("%w: reading %s: %v", ErrMalformed, p.name, err)
		}
	}
	if _, err := tr.Next(); err != io.EOF {
		return nil, nil, fmt.Errorf("%w: more than the %d files of a bundle (%v)", ErrMalformed, len(layout), err)
	}
	// The tar's end and the gzip trailer (its CRC and length) must follow.
	if _, err := io.Copy(io.Discard, budget); err != nil {
		return nil, nil, fmt.Errorf("%w: reading the end of the tar: %v", ErrMalformed, err)
	}
	if src.Len() > 0 {
		return nil, nil, fmt.Errorf("%w: %d bytes after the gzip stream", ErrMalformed, src.Len())
	}
	return files, sum.Sum(nil), nil
}

// limitedReader fails, rather than stops, once n bytes were read.
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("%w: larger than %d bytes uncompressed", ErrMalformed, int64(MaxBundleSize))
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// expand returns the seqs of ranges, which must be in order, neither
// overlapping nor touching, and count entries in all (1 to MaxEntries).
func expand(ranges []SeqRange, count int) ([]uint64, error) {
	if count < 1 || count > MaxEntries {
		return nil, fmt.Errorf("%w: manifest: %d entries, want 1 to %d", ErrMalformed, count, MaxEntries)
	}
	var total uint64
	for i, r := range ranges {
		if r[1] < r[0] || (i > 0 && (r[0] <= ranges[i-1][1] || r[0]-ranges[i-1][1] == 1)) {
			return nil, fmt.Errorf("%w: manifest: seq range %d [%d, %d] is out of order, overlaps or touches the one before", ErrMalformed, i, r[0], r[1])
		}
		if r[1]-r[0] >= uint64(count) || total+(r[1]-r[0]+1) > uint64(count) {
			return nil, fmt.Errorf("%w: manifest: the seq ranges hold more than its %d entries", ErrMalformed, count)
		}
		total += r[1] - r[0] + 1
	}
	if total != uint64(count) {
		return nil, fmt.Errorf("%w: manifest: the seq ranges hold %d seqs for %d entries", ErrMalformed, total, count)
	}
	seqs := make([]uint64, 0, count)
	for _, r := range ranges {
		for s := r[0]; ; s++ {
			seqs = append(seqs, s)
			if s == r[1] {
				break
			}
		}
	}
	return seqs, nil
}

// ranges returns seqs, in increasing order, as ranges.
func ranges(seqs []uint64) []SeqRange {
	var out []SeqRange
	for _, s := range seqs {
		if n := len(out); n > 0 && out[n-1][1]+1 == s {
			out[n-1][1] = s
			continue
		}
		out = append(out, SeqRange{s, s})
	}
	return out
}

// splitEntries splits the entries blob, one entry and a newline each, and
// gives them seqs.
func splitEntries(blob []byte, seqs []uint64) ([]Entry, error) {
	out := make([]Entry, 0, len(seqs))
	rest := blob
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return nil, fmt.Errorf("%w: %s: the last entry has no newline", ErrMalformed, entriesName)
		}
		if len(out) == len(seqs) {
			return nil, fmt.Errorf("%w: %s holds more than the manifest's %d entries", ErrMalformed, entriesName, len(seqs))
		}
		out = append(out, Entry{Seq: seqs[len(out)], Raw: rest[:i:i]})
		rest = rest[i+1:]
	}
	if len(out) != len(seqs) {
		return nil, fmt.Errorf("%w: %s holds %d entries, the manifest %d", ErrMalformed, entriesName, len(out), len(seqs))
	}
	return out, nil
}
