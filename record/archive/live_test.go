package archive

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index/indextest"
	"github.com/sandtrail/sandtrail/record/journal"
)

// TestVerifyLive ties bundles to the journal they came from: one sealed
// before the journal grew verifies through a consistency proof to the
// newer checkpoint; the live check needs only the hash file and the
// checkpoints, not the entries' bodies; and a journal that was truncated,
// forked or whose leaf hashes differ fails.
func TestVerifyLive(t *testing.T) {
	f := newFixture(t, 2, 15)
	early := f.seal(t, f.sessions[0])
	before := copyDir(t, f.dir, nil) // the journal as it was at early's checkpoint
	// The journal grows: a later stream, another run of the host.
	f.append(t, indextest.Config{Sessions: 2, PerSession: 15, Concurrent: 2, Seed: 8, Start: sealedAt})
	f.sessions = nil
	grown := f.seal(t, indextest.SessionID(1))
	if grown.Manifest.Checkpoint.Size <= early.Manifest.Checkpoint.Size {
		t.Fatalf("the grown journal's checkpoint %d is not past the early one's %d", grown.Manifest.Checkpoint.Size, early.Manifest.Checkpoint.Size)
	}
	// A fork: the early journal, grown with other entries, signed by the
	// same key.
	fork := &fixture{dir: copyDir(t, before, nil), signer: f.signer, verifiers: f.verifiers}
	fork.append(t, indextest.Config{Sessions: 3, PerSession: 20, Concurrent: 3, Seed: 9, Start: sealedAt})
	// The grown journal without its entries' bodies: only the hash file
	// and the checkpoints, as pruning will leave them.
	hashesOnly := copyDir(t, f.dir, func(name string) bool { return strings.HasPrefix(name, "seg-") })
	noHashes := copyDir(t, f.dir, func(name string) bool { return name == hashFileName })
	badLeaf := copyDir(t, f.dir, nil)
	flipStoredLeaf(t, badLeaf, early.Entries[2].Seq)

	tests := []struct {
		name    string
		bundle  *Bundle
		dir     string
		want    error // nil: verified
		msg     string
		anError bool // fails, but neither ErrLiveMismatch nor ErrTampered
	}{
		{"same checkpoint", early, before, nil, "", false},
		{"journal grew since", early, f.dir, nil, "", false},
		{"entries pruned to their hashes", early, hashesOnly, nil, "", false},
		{"newest bundle, entries pruned", grown, hashesOnly, nil, "", false},
		{"journal truncated", grown, before, ErrLiveMismatch, "fewer than the bundle's", false},
		{"forked journal", grown, fork.dir, ErrLiveMismatch, "the live tree of size", false},
		{"early bundle on the fork", early, fork.dir, nil, "", false},
		{"no hash file", early, noHashes, nil, "hash file", true},
		{"stored leaf hash altered", early, badLeaf, ErrLiveMismatch, "live journal's leaf hash", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := tt.bundle.VerifyLive(tt.dir, f.verifiers)
			switch {
			case tt.anError:
				if err == nil || errors.Is(err, ErrLiveMismatch) || errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("VerifyLive() = %v, want an error mentioning %q", err, tt.msg)
				}
			case tt.want == nil:
				if err != nil {
					t.Fatalf("VerifyLive() = %v, want verified", err)
				}
				if rep.Live == nil || rep.Live.Leaves != tt.bundle.Manifest.Entries || rep.Live.Checkpoint.Size < rep.Checkpoint.Size {
					t.Errorf("VerifyLive().Live = %+v", rep.Live)
				}
			default:
				if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("VerifyLive() = %v, want %v mentioning %q", err, tt.want, tt.msg)
				}
			}
		})
	}
}

// TestVerifyLiveOtherOrigin: a bundle does not match another journal (of
// another origin), nor one whose newest checkpoint does not verify.
func TestVerifyLiveOtherOrigin(t *testing.T) {
	f := newFixture(t, 1, 5)
	b := f.seal(t, f.sessions[0])
	g := &fixture{dir: filepath.Join(t.TempDir(), "journal"), signer: f.signer, verifiers: f.verifiers}
	g.appendEvents(t, []journal.Option{journal.WithOrigin("sandtrail/other")}, toolCalls(8)...)
	if _, err := b.VerifyLive(g.dir, f.verifiers); !errors.Is(err, ErrLiveMismatch) || !strings.Contains(err.Error(), "origin") {
		t.Errorf("VerifyLive(another origin) = %v, want ErrLiveMismatch naming the origin", err)
	}
	forged := copyDir(t, f.dir, nil)
	cp := filepath.Join(forged, "checkpoints", "latest")
	data, err := os.ReadFile(cp)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), "sandtrail/test\n", "sandtrail/tesT\n", 1))
	if err := os.WriteFile(cp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := b.VerifyLive(forged, f.verifiers); !errors.Is(err, ErrLiveMismatch) || !errors.Is(err, journal.ErrBadSignature) {
		t.Errorf("VerifyLive(forged live checkpoint) = %v, want ErrLiveMismatch and journal.ErrBadSignature", err)
	}
	if _, err := b.VerifyLive(t.TempDir(), f.verifiers); err == nil || errors.Is(err, ErrLiveMismatch) {
		t.Errorf("VerifyLive(no journal) = %v, want an error reading it", err)
	}
}

// toolCalls returns n tool.invoke events of session sess-other.
func toolCalls(n int) []*event.Event {
	var out []*event.Event
	for range n {
		out = append(out, &event.Event{Kind: "tool.invoke", Source: event.SourceAPI, SessionID: "sess-other", Tool: &event.Tool{Name: "bash"}})
	}
	return out
}

// flipStoredLeaf changes the stored leaf hash of seq in dir's hash file.
func flipStoredLeaf(t *testing.T, dir string, seq uint64) {
	t.Helper()
	h, err := journal.OpenStoredHashes(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := h.Leaf(seq)
	h.Close()
	if err != nil {
		t.Fatal(err)
	}
	leaf[0] ^= 1
	fh, err := os.OpenFile(filepath.Join(dir, hashFileName), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteAt(leaf[:], storedLeafOffset(seq)); err != nil {
		t.Fatal(err)
	}
}

func storedLeafOffset(seq uint64) int64 { return tlog.StoredHashIndex(0, int64(seq)) * tlog.HashSize }

// hashFileName is the journal's file of stored hashes (docs/journal.md),
// which these tests remove and alter.
const hashFileName = "hashes"
