package archive

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
)

// TestSealVerifyRoundTrip seals each session of a real journal of
// interleaved sessions, with and without the index, and verifies the
// bundles alone and against the live journal.
func TestSealVerifyRoundTrip(t *testing.T) {
	const per = 40
	f := newFixture(t, 5, per)
	ctx := context.Background()
	for _, s := range f.sessions {
		t.Run(s, func(t *testing.T) {
			b := f.seal(t, s)
			noIndex, err := Seal(ctx, f.dir, nil, s, f.verifiers, WithCreated(sealedAt))
			if err != nil {
				t.Fatalf("Seal(%s, no index) = %v", s, err)
			}
			if !bytes.Equal(noIndex.Bytes(), b.Bytes()) {
				t.Errorf("Seal(%s) with and without the index differ", s)
			}
			again := f.seal(t, s)
			if again.Digest() != b.Digest() {
				t.Errorf("Seal(%s) twice = %s, %s, want the same bytes", s, b.Digest(), again.Digest())
			}
			parsed, err := Parse(b.Bytes())
			if err != nil {
				t.Fatalf("Parse(Seal(%s)) = %v", s, err)
			}
			rep, err := parsed.Verify(f.verifiers)
			if err != nil {
				t.Fatalf("Verify() = %v", err)
			}
			if rep.SessionID != s || rep.Entries != per || !slices.Equal(rep.Hosts, []string{"bench"}) || rep.Origin != "sandtrail/test" {
				t.Errorf("Verify() = %+v, want session %s, %d entries, host bench, origin sandtrail/test", rep, s, per)
			}
			for i, e := range parsed.Entries {
				raw, err := journal.Entry(f.dir, e.Seq)
				if err != nil || !bytes.Equal(raw, e.Raw) {
					t.Fatalf("entry %d of the bundle differs from the journal's (%v)", i, err)
				}
			}
			live, err := parsed.VerifyLive(f.dir, f.verifiers)
			if err != nil {
				t.Fatalf("VerifyLive() = %v", err)
			}
			if live.Live == nil || live.Live.Leaves != per {
				t.Errorf("VerifyLive().Live = %+v, want %d leaves matched", live.Live, per)
			}
		})
	}
}

// TestSealErrors: a session with no entries, an id that cannot name a
// bundle, and a session whose last entry no checkpoint covers yet.
func TestSealErrors(t *testing.T) {
	f := newFixture(t, 2, 10)
	ctx := context.Background()
	if _, err := Seal(ctx, f.dir, f.ix, "sess-none", f.verifiers); !errors.Is(err, ErrNoSession) {
		t.Errorf("Seal(unknown session) = %v, want ErrNoSession", err)
	}
	if _, err := Seal(ctx, f.dir, nil, "sess-none", f.verifiers); !errors.Is(err, ErrNoSession) {
		t.Errorf("Seal(unknown session, no index) = %v, want ErrNoSession", err)
	}
	if _, err := Seal(ctx, f.dir, nil, "../etc", f.verifiers); !errors.Is(err, ErrBadSession) {
		t.Errorf("Seal(../etc) = %v, want ErrBadSession", err)
	}
	_, other := journaltest.Keys(t, "sandtrail/test")
	if _, err := Seal(ctx, f.dir, nil, f.sessions[0], other); !errors.Is(err, journal.ErrUnknownKey) {
		t.Errorf("Seal(another key) = %v, want journal.ErrUnknownKey", err)
	}

	// A journal still open, whose newest entries no checkpoint covers.
	j, err := journal.Open(f.dir, f.signer, journal.WithCheckpointInterval(time.Hour), journal.WithCheckpointEvery(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	late := &event.Event{Kind: "tool.invoke", Source: event.SourceAPI, SessionID: f.sessions[1], Tool: &event.Tool{Name: "bash"}}
	if err := j.Append(ctx, late); err != nil {
		t.Fatal(err)
	}
	_, err = Seal(ctx, f.dir, nil, f.sessions[1], f.verifiers)
	if !errors.Is(err, ErrNotCovered) || !strings.Contains(err.Error(), "daemon stops") {
		t.Errorf("Seal(uncovered session) = %v, want ErrNotCovered saying how to get a checkpoint", err)
	}
	if _, err := j.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	// The index has not seen the late entry: Seal reads the tail it has not
	// handled, so an index that lags leaves nothing out.
	b, err := Seal(ctx, f.dir, f.ix, f.sessions[1], f.verifiers)
	if err != nil {
		t.Fatalf("Seal(after a checkpoint) = %v", err)
	}
	if b.Manifest.Entries != 11 {
		t.Errorf("Seal(after a checkpoint, index behind) holds %d entries, want 11", b.Manifest.Entries)
	}
}

// TestSealIndexDisagrees: an index that names an entry the journal does
// not give the session is an error, not a bundle that leaves it out.
func TestSealIndexDisagrees(t *testing.T) {
	f := newFixture(t, 2, 10)
	g := newFixture(t, 3, 10) // its index, another journal
	_, err := Seal(context.Background(), f.dir, g.ix, g.sessions[2], f.verifiers)
	if !errors.Is(err, ErrIndexMismatch) && !errors.Is(err, ErrNoSession) {
		t.Errorf("Seal(with another journal's index) = %v, want ErrIndexMismatch or ErrNoSession", err)
	}
	// An index of this journal that names an entry the journal no longer
	// gives the session: as after a prune that the index has not caught up
	// with. Here: the index of the grown journal, on a copy from before.
	before := copyDir(t, f.dir, nil)
	f.appendEvents(t, nil, &event.Event{Kind: "tool.invoke", Source: event.SourceAPI, SessionID: f.sessions[0], Tool: &event.Tool{Name: "sh"}})
	if _, err := f.ix.CatchUp(context.Background(), f.dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Seal(context.Background(), before, f.ix, f.sessions[0], f.verifiers); !errors.Is(err, ErrIndexMismatch) {
		t.Errorf("Seal(an index ahead of the journal) = %v, want ErrIndexMismatch", err)
	}
}

// TestVerifyTampered alters one part of a bundle at a time; each fails
// closed with an error naming what failed.
func TestVerifyTampered(t *testing.T) {
	f := newFixture(t, 3, 20)
	b := f.seal(t, f.sessions[0])
	other := f.seal(t, f.sessions[1])
	otherSigner, otherVerifiers := journaltest.Keys(t, "sandtrail/test")
	tests := []struct {
		name       string
		alter      func(p *parts)
		fixDigests bool
		want       error
		msg        string
	}{
		{"entry byte, stale digest", func(p *parts) { p.entries[3][20] ^= 1 }, false, ErrTampered, "entries.jsonl"},
		{"entry byte", func(p *parts) { p.entries[3] = bytes.Replace(p.entries[3], []byte(`"bench"`), []byte(`"bencH"`), 1) }, true, ErrTampered, "leaf hash"},
		{"entry and its leaf hash", func(p *parts) {
			p.entries[3] = bytes.Replace(p.entries[3], []byte(`"bench"`), []byte(`"bencH"`), 1)
			p.manifest.LeafHashes[3] = journal.LeafHash(p.entries[3])
		}, true, ErrTampered, "inclusion proof"},
		{"entry of another session with its proof", func(p *parts) {
			p.entries[0], p.proofs[0] = other.Entries[0].Raw, other.Proofs[0]
			p.manifest.LeafHashes[0] = other.Manifest.LeafHashes[0]
			p.manifest.Seqs = ranges(append([]uint64{other.Entries[0].Seq}, seqsOf(b)[1:]...))
		}, true, ErrTampered, ""},
		{"proof hash", func(p *parts) { p.proofs[2].Hashes[0][0] ^= 1 }, true, ErrTampered, "inclusion proof"},
		{"proof seq", func(p *parts) { p.proofs[2].Seq++ }, true, ErrTampered, "proof 2"},
		{"proof dropped", func(p *parts) { p.proofs = p.proofs[1:] }, true, ErrMalformed, "proofs"},
		{"manifest session", func(p *parts) { p.manifest.SessionID = other.Session() }, true, ErrTampered, "not session"},
		{"manifest seqs", func(p *parts) {
			seqs := seqsOf(b)
			seqs[len(seqs)-1]++
			p.manifest.Seqs = ranges(seqs)
		}, true, ErrTampered, "entry"},
		{"manifest and proof seqs", func(p *parts) {
			seqs := seqsOf(b)
			seqs[len(seqs)-1]++
			p.manifest.Seqs = ranges(seqs)
			p.proofs[len(p.proofs)-1].Seq++
		}, true, ErrTampered, "inclusion proof"},
		{"manifest hosts", func(p *parts) { p.manifest.Hosts = []string{"elsewhere"} }, true, ErrTampered, "hosts"},
		{"manifest root", func(p *parts) { p.manifest.Checkpoint.Root[0] ^= 1 }, true, ErrTampered, "signed checkpoint"},
		{"manifest size", func(p *parts) { p.manifest.Checkpoint.Size++ }, true, ErrTampered, "signed checkpoint"},
		{"manifest format", func(p *parts) { p.manifest.Format = "sandtrail.session-bundle.v0" }, true, ErrTampered, "format"},
		{"manifest entries", func(p *parts) { p.manifest.Entries++ }, true, ErrMalformed, "lines"},
		{"manifest leaf hash", func(p *parts) { p.manifest.LeafHashes[5][1] ^= 1 }, true, ErrTampered, "leaf hash"},
		{"checkpoint body", func(p *parts) {
			p.checkpoint = bytes.Replace(p.checkpoint, []byte("sandtrail/test\n"), []byte("sandtrail/tesT\n"), 1)
		}, true, journal.ErrBadSignature, "checkpoint"},
		{"checkpoint re-signed by another key", func(p *parts) { p.checkpoint = resign(t, p.checkpoint, otherSigner) }, true, journal.ErrUnknownKey, "checkpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := partsOf(b)
			tt.alter(p)
			data := p.encode(t, tt.fixDigests)
			got, err := Parse(data)
			if err == nil {
				_, err = got.Verify(f.verifiers)
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Verify(%s) = %v, want %v mentioning %q", tt.name, err, tt.want, tt.msg)
			}
			if tt.want != ErrMalformed && !errors.Is(err, ErrTampered) {
				t.Errorf("Verify(%s) = %v, want it to wrap ErrTampered", tt.name, err)
			}
		})
	}
	// A bundle re-signed by another key verifies only with that key.
	p := partsOf(b)
	p.checkpoint = resign(t, p.checkpoint, otherSigner)
	got, err := Parse(p.encode(t, true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := got.Verify(otherVerifiers); err != nil {
		t.Errorf("Verify(re-signed, with the other key) = %v, want it verified", err)
	}
}

func seqsOf(b *Bundle) []uint64 {
	var out []uint64
	for _, e := range b.Entries {
		out = append(out, e.Seq)
	}
	return out
}

// resign signs the body of checkpoint note msg with s instead.
func resign(t *testing.T, msg []byte, s note.Signer) []byte {
	t.Helper()
	i := bytes.Index(msg, []byte("\n\n"))
	out, err := note.Sign(&note.Note{Text: string(msg[:i+1])}, s)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestParseLayout: bytes that are not a bundle's layout are ErrMalformed.
func TestParseLayout(t *testing.T) {
	f := newFixture(t, 1, 5)
	b := f.seal(t, f.sessions[0])
	files := filesOf(t, b.Bytes())
	swap := slices.Clone(files)
	swap[1], swap[2] = swap[2], swap[1]
	if _, err := Parse(gzipTar(t, files, nil)); err != nil {
		t.Fatalf("Parse(the bundle's files through gzipTar) = %v, want the bundle", err)
	}
	otherHeader := slices.Clone(b.Bytes())
	otherHeader[9] = 3 // OS: Unix
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "gzip header"},
		{"not gzip", []byte("manifest.json"), "gzip header"},
		{"another gzip header", otherHeader, "gzip header"},
		{"truncated", b.Bytes()[:len(b.Bytes())/2], "reading"},
		{"trailing stream", append(slices.Clone(b.Bytes()), b.Bytes()...), "after the gzip stream"},
		{"files out of order", gzipTar(t, swap, nil), "want the regular file checkpoint"},
		{"a file missing", gzipTar(t, files[:3], nil), "reading proofs"},
		{"an extra file", gzipTar(t, append(slices.Clone(files), tarFile{name: "extra", data: []byte("x")}), nil), "more than the 4 files"},
		{"a directory", gzipTar(t, append([]tarFile{{name: manifestName, typ: '5'}}, files[1:]...), nil), "want the regular file manifest"},
		{"manifest unknown field", gzipTar(t, append([]tarFile{{name: manifestName, data: append(bytes.TrimSuffix(files[0].data, []byte("}")), []byte(`,"extra":1}`)...)}}, files[1:]...), nil), "unknown field"},
		{"another mode", gzipTar(t, withMode(files, 0o600), nil), "tar's headers"},
		{"entries without last newline", gzipTar(t, []tarFile{files[0], files[1], {name: entriesName, data: bytes.TrimSuffix(files[2].data, []byte("\n"))}, files[3]}, nil), "lines, the manifest names"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.data)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%s) = %v, want ErrMalformed saying %q", tt.name, err, tt.want)
			}
		})
	}
}

// withMode returns files with mode set on each.
func withMode(files []tarFile, mode int64) []tarFile {
	out := slices.Clone(files)
	for i := range out {
		out[i].mode = mode
	}
	return out
}

// TestTamperedBundleBytes flips each bit of two in every byte of a bundle:
// each flip is refused by Parse or Verify, or gives the same tar, byte for
// byte (deflate can say the same thing in other bits: the bundle's
// evidence is what it decodes to). A flip of the gzip header is refused.
func TestTamperedBundleBytes(t *testing.T) {
	f := newFixture(t, 2, 4)
	data := f.seal(t, f.sessions[0]).Bytes()
	plain := gunzip(t, data)
	same := 0
	for i := range data {
		for _, bit := range []byte{0x01, 0x40} {
			d := slices.Clone(data)
			d[i] ^= bit
			p, err := Parse(d)
			if err == nil {
				_, err = p.Verify(f.verifiers)
			}
			switch {
			case err != nil:
			case i < len(gzipHeader):
				t.Errorf("a flip of %#x in byte %d of the gzip header is accepted", bit, i)
			case !bytes.Equal(gunzip(t, d), plain):
				t.Errorf("a flip of %#x in byte %d of %d changes the tar and verifies", bit, i, len(d))
			default:
				same++
			}
		}
	}
	t.Logf("%d bytes, %d flips, %d decoding to the same tar", len(data), 2*len(data), same)
}
