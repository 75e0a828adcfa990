package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/index/indextest"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
)

// sealedAt is the created time of the tests' bundles.
var sealedAt = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// fixture is a real, closed journal of several interleaved sessions (from
// indextest), with its signer, verifiers and a caught-up index.
type fixture struct {
	dir       string
	signer    note.Signer
	verifiers note.Verifiers
	ix        *index.Index
	sessions  []string
}

// newFixture writes sessions sessions of per events each, running side by
// side, into a fresh journal signed by a fresh key, and closes it (which
// signs a checkpoint of everything).
func newFixture(t testing.TB, sessions, per int) *fixture {
	t.Helper()
	signer, vs := journaltest.Keys(t, "sandtrail/test")
	f := &fixture{dir: filepath.Join(t.TempDir(), "journal"), signer: signer, verifiers: vs}
	f.append(t, indextest.Config{Sessions: sessions, PerSession: per, Concurrent: 3, Seed: 7})
	for i := range sessions {
		f.sessions = append(f.sessions, indextest.SessionID(i))
	}
	ix, err := index.OpenCurrent(context.Background(), filepath.Join(t.TempDir(), "index.db"), f.dir)
	if err != nil {
		t.Fatalf("index.OpenCurrent() = %v", err)
	}
	t.Cleanup(func() { ix.Close() })
	f.ix = ix
	return f
}

// append opens the journal, appends the stream of c, and closes it.
func (f *fixture) append(t testing.TB, c indextest.Config) {
	t.Helper()
	var evs []*event.Event
	err := indextest.Generate(c, func(ev *event.Event) error {
		e := *ev
		e.Seq = 0
		evs = append(evs, &e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.appendEvents(t, nil, evs...)
}

// appendEvents opens the journal with opts, appends evs, and closes it.
func (f *fixture) appendEvents(t testing.TB, opts []journal.Option, evs ...*event.Event) {
	t.Helper()
	j, err := journal.Open(f.dir, f.signer, append([]journal.Option{journal.WithSegmentSize(32 << 10)}, opts...)...)
	if err != nil {
		t.Fatalf("journal.Open() = %v", err)
	}
	if err := j.Append(context.Background(), evs...); err != nil {
		t.Fatalf("Append() = %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
}

// seal seals a session of the fixture, failing the test on error.
func (f *fixture) seal(t testing.TB, session string) *Bundle {
	t.Helper()
	b, err := Seal(context.Background(), f.dir, f.ix, session, f.verifiers, WithCreated(sealedAt))
	if err != nil {
		t.Fatalf("Seal(%s) = %v", session, err)
	}
	return b
}

// copyDir copies a journal directory (files and checkpoints/), leaving
// out the files skip names.
func copyDir(t testing.TB, from string, skip func(name string) bool) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "journal")
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		if rel == "LOCK" || (skip != nil && skip(rel)) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// parts are a bundle's files, for tests that alter one and re-encode.
type parts struct {
	manifest   Manifest
	checkpoint []byte
	entries    [][]byte
	proofs     []Proof
}

func partsOf(b *Bundle) *parts {
	p := &parts{manifest: b.Manifest, checkpoint: bytes.Clone(b.Checkpoint)}
	p.manifest.LeafHashes = append(p.manifest.LeafHashes[:0:0], b.Manifest.LeafHashes...)
	p.manifest.Seqs = append(p.manifest.Seqs[:0:0], b.Manifest.Seqs...)
	p.manifest.Hosts = append(p.manifest.Hosts[:0:0], b.Manifest.Hosts...)
	for _, e := range b.Entries {
		p.entries = append(p.entries, bytes.Clone(e.Raw))
	}
	for _, pr := range b.Proofs {
		p.proofs = append(p.proofs, Proof{Seq: pr.Seq, Hashes: append(pr.Hashes[:0:0], pr.Hashes...)})
	}
	return p
}

// encode re-encodes the parts; with fixDigests the manifest's blob
// descriptions are recomputed, so that only the change under test shows.
func (p *parts) encode(t testing.TB, fixDigests bool) []byte {
	t.Helper()
	var blob bytes.Buffer
	for _, e := range p.entries {
		blob.Write(e)
		blob.WriteByte('\n')
	}
	pj, err := json.Marshal(p.proofs)
	if err != nil {
		t.Fatal(err)
	}
	m := p.manifest
	if fixDigests {
		m.EntriesBlob = Blob{Name: entriesName, Size: int64(blob.Len()), Digest: digestOf(blob.Bytes())}
		m.ProofsBlob = Blob{Name: proofsName, Size: int64(len(pj)), Digest: digestOf(pj)}
	}
	data, err := encode(&m, p.checkpoint, blob.Bytes(), pj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// tarFile is one file of a hand-made tar.
type tarFile struct {
	name string
	typ  byte
	data []byte
	mode int64 // 0o644 when 0
}

// gzipTar writes files as a gzip-compressed tar, for layout tests.
func gzipTar(t testing.TB, files []tarFile, trailer []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	for _, f := range files {
		typ := f.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := f.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: f.name, Typeflag: typ, Mode: mode, Size: int64(len(f.data)), ModTime: sealedAt, Format: tar.FormatUSTAR}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write(f.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	tw.Close()
	zw.Close()
	return append(buf.Bytes(), trailer...)
}

// filesOf returns the files of a bundle, in order.
func filesOf(t testing.TB, data []byte) []tarFile {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []tarFile
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out = append(out, tarFile{name: h.Name, data: b})
	}
}

// gunzip returns the decompressed bytes of a gzip stream, or nil.
func gunzip(t testing.TB, data []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	b, _ := io.ReadAll(zr)
	return b
}
