package archive

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
)

// Report is what a verified bundle holds.
type Report struct {
	SessionID  string        `json:"session_id"`
	Digest     string        `json:"digest"`
	Origin     string        `json:"origin"`
	Hosts      []string      `json:"hosts"`
	Created    time.Time     `json:"created"`
	Entries    int           `json:"entries"`
	First      uint64        `json:"first_seq"`
	Last       uint64        `json:"last_seq"`
	Checkpoint CheckpointRef `json:"checkpoint"`
	// Live is set by VerifyLive.
	Live *LiveReport `json:"live,omitempty"`
}

// LiveReport is what VerifyLive compared with the live journal.
type LiveReport struct {
	Journal string `json:"journal"`
	// Checkpoint is the live journal's newest checkpoint, which the
	// bundle's is consistent with.
	Checkpoint CheckpointRef `json:"checkpoint"`
	// Leaves counts the stored leaf hashes that matched the bundle's.
	Leaves int `json:"leaves_matched"`
}

// Verify checks the bundle, failing closed at the first claim that does not
// hold: the manifest's format, session id, counts and the digests of the
// entries and proofs files; the checkpoint's signature (every signature must
// be by one of verifiers, as for the journal's own checkpoints) and that its
// origin, size and root are the manifest's; then, for each entry, that its
// leaf hash is the manifest's, that its proof verifies against the signed
// root, and that it decodes, holds its own seq and belongs to the session;
// and that the manifest's hosts are the entries'. Errors wrap ErrTampered
// (and the journal's checkpoint error for a bad checkpoint) and name what
// failed. The manifest's created time is the sealer's word: nothing signs it.
func (b *Bundle) Verify(verifiers note.Verifiers) (*Report, error) {
	m := &b.Manifest
	if err := b.checkManifest(); err != nil {
		return nil, err
	}
	cp, err := journal.ParseCheckpoint(b.Checkpoint, verifiers)
	if err != nil {
		return nil, fmt.Errorf("%w: checkpoint: %w", ErrTampered, err)
	}
	if cp.Origin != m.Origin || cp.Size != m.Checkpoint.Size || cp.Root != m.Checkpoint.Root {
		return nil, fmt.Errorf("%w: the manifest names checkpoint %s size %d root %s, the signed checkpoint is %s size %d root %s",
			ErrTampered, event.Clip(m.Origin, 64), m.Checkpoint.Size, m.Checkpoint.Root, event.Clip(cp.Origin, 64), cp.Size, cp.Root)
	}
	hosts, err := b.checkEntries(cp)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(hosts, m.Hosts) {
		return nil, fmt.Errorf("%w: the manifest names hosts %q, the entries %q", ErrTampered, m.Hosts, hosts)
	}
	return &Report{SessionID: m.SessionID, Digest: b.digest, Origin: cp.Origin, Hosts: hosts, Created: m.Created,
		Entries: len(b.Entries), First: b.Entries[0].Seq, Last: b.Entries[len(b.Entries)-1].Seq,
		Checkpoint: m.Checkpoint}, nil
}

// checkManifest checks what the manifest says of itself and of the files.
func (b *Bundle) checkManifest() error {
	m := &b.Manifest
	switch {
	case len(b.Entries) == 0 || len(b.Proofs) != len(b.Entries):
		return fmt.Errorf("%w: %d entries and %d proofs", ErrTampered, len(b.Entries), len(b.Proofs))
	case m.Format != Format:
		return fmt.Errorf("%w: manifest format %q, want %q", ErrTampered, event.Clip(m.Format, 64), Format)
	case CheckSession(m.SessionID) != nil:
		return fmt.Errorf("%w: manifest: %w", ErrTampered, CheckSession(m.SessionID))
	case len(m.LeafHashes) != len(b.Entries) || m.Entries != len(b.Entries):
		return fmt.Errorf("%w: the manifest names %d entries and %d leaf hashes, the bundle holds %d entries", ErrTampered, m.Entries, len(m.LeafHashes), len(b.Entries))
	case b.Entries[len(b.Entries)-1].Seq >= m.Checkpoint.Size:
		return fmt.Errorf("%w: entry %d is past the checkpoint of size %d", ErrTampered, b.Entries[len(b.Entries)-1].Seq, m.Checkpoint.Size)
	}
	if err := checkBlob(m.EntriesBlob, entriesName, b.entries); err != nil {
		return err
	}
	return checkBlob(m.ProofsBlob, proofsName, b.proofs)
}

// checkBlob checks a manifest's description of a file against its bytes.
func checkBlob(want Blob, name string, data []byte) error {
	if want.Name != name || want.Size != int64(len(data)) || want.Digest != digestOf(data) {
		return fmt.Errorf("%w: the manifest describes %s as %q, %d bytes, %s; it is %d bytes, %s",
			ErrTampered, name, event.Clip(want.Name, 64), want.Size, event.Clip(want.Digest, 80), len(data), digestOf(data))
	}
	return nil
}

// checkEntries checks each entry against the manifest and the checkpoint,
// and returns the distinct hosts of the entries, sorted.
func (b *Bundle) checkEntries(cp *journal.Checkpoint) ([]string, error) {
	hosts := []string{}
	for i, e := range b.Entries {
		leaf := journal.LeafHash(e.Raw)
		if leaf != b.Manifest.LeafHashes[i] {
			return nil, fmt.Errorf("%w: entry %d: its leaf hash is %s, the manifest says %s", ErrTampered, e.Seq, leaf, b.Manifest.LeafHashes[i])
		}
		p := b.Proofs[i]
		if p.Seq != e.Seq {
			return nil, fmt.Errorf("%w: proof %d is for seq %d, not entry %d", ErrTampered, i, p.Seq, e.Seq)
		}
		if err := tlog.CheckRecord(p.Hashes, int64(cp.Size), cp.Root, int64(e.Seq), leaf); err != nil {
			return nil, fmt.Errorf("%w: entry %d: its inclusion proof does not verify against the checkpoint of size %d: %v", ErrTampered, e.Seq, cp.Size, err)
		}
		ev, err := event.DecodeStored(e.Raw)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d: %v", ErrTampered, e.Seq, err)
		}
		if ev.Seq != e.Seq || ev.SessionID != b.Manifest.SessionID {
			return nil, fmt.Errorf("%w: entry %d holds seq %d of session %q, not session %s's", ErrTampered, e.Seq, ev.Seq, event.Clip(ev.SessionID, 80), b.Manifest.SessionID)
		}
		if ev.Host != "" && !slices.Contains(hosts, ev.Host) {
			hosts = append(hosts, ev.Host)
		}
	}
	slices.Sort(hosts)
	return hosts, nil
}

// VerifyLive verifies the bundle (Verify) and then ties it to the live
// journal in journalDir: the journal's newest checkpoint, signed by one of
// verifiers and of the bundle's origin, must be at least as large as the
// bundle's; the tree that the journal's hash file holds must hash to that
// checkpoint's root, and at the bundle's size to the bundle's root, with a
// consistency proof between the two signed roots; and the stored leaf hash
// at each of the bundle's seqs must be the bundle's. It reads only the
// hash file and the checkpoints, so it works on a journal whose entries
// were pruned to their leaf hashes.
//
// Errors wrap ErrTampered (the bundle alone), ErrLiveMismatch (the bundle
// and the journal disagree, or the live checkpoint does not verify), or
// are plain errors when the journal cannot be read or its hash file does
// not match its own checkpoint (run sandtrail verify).
func (b *Bundle) VerifyLive(journalDir string, verifiers note.Verifiers) (*Report, error) {
	rep, err := b.Verify(verifiers)
	if err != nil {
		return nil, err
	}
	live, err := journal.LatestCheckpoint(journalDir, verifiers)
	switch {
	case errors.Is(err, journal.ErrNotFound):
		return nil, fmt.Errorf("comparing with the live journal: %w", err)
	case err != nil && (errors.Is(err, journal.ErrBadSignature) || errors.Is(err, journal.ErrUnknownKey) || errors.Is(err, journal.ErrBadCheckpoint)):
		return nil, fmt.Errorf("%w: its newest checkpoint: %w", ErrLiveMismatch, err)
	case err != nil:
		return nil, fmt.Errorf("comparing with the live journal: %w", err)
	case live.Origin != rep.Origin:
		return nil, fmt.Errorf("%w: the live journal's origin is %q, the bundle's %q: another journal", ErrLiveMismatch, event.Clip(live.Origin, 64), rep.Origin)
	case live.Size < rep.Checkpoint.Size:
		return nil, fmt.Errorf("%w: the live journal's newest checkpoint covers %d entries, fewer than the bundle's %d: it was truncated or its checkpoints removed", ErrLiveMismatch, live.Size, rep.Checkpoint.Size)
	}
	leaves, err := b.compareLive(journalDir, live)
	if err != nil {
		return nil, err
	}
	rep.Live = &LiveReport{Journal: journalDir, Checkpoint: CheckpointRef{Size: live.Size, Root: live.Root}, Leaves: leaves}
	return rep, nil
}

// compareLive compares the bundle's tree and leaves with the hash file of
// the live journal, whose newest checkpoint is live.
func (b *Bundle) compareLive(dir string, live *journal.Checkpoint) (int, error) {
	size, root := b.Manifest.Checkpoint.Size, b.Manifest.Checkpoint.Root
	hr, err := journal.OpenStoredHashes(dir, live.Size)
	if err != nil {
		return 0, fmt.Errorf("comparing with the live journal: %w", err)
	}
	defer hr.Close()
	if h, err := tlog.TreeHash(int64(live.Size), hr); err != nil || h != live.Root {
		return 0, fmt.Errorf("comparing with the live journal: its hash file does not hash to its newest checkpoint's root (size %d): run sandtrail verify", live.Size)
	}
	at, err := tlog.TreeHash(int64(size), hr)
	if err != nil {
		return 0, fmt.Errorf("comparing with the live journal: %w", err)
	}
	if at != root {
		return 0, fmt.Errorf("%w: the live tree of size %d has root %s, the bundle's checkpoint %s", ErrLiveMismatch, size, at, root)
	}
	proof, err := tlog.ProveTree(int64(live.Size), int64(size), hr)
	if err != nil {
		return 0, fmt.Errorf("comparing with the live journal: proving consistency: %w", err)
	}
	if err := tlog.CheckTree(proof, int64(live.Size), live.Root, int64(size), root); err != nil {
		return 0, fmt.Errorf("%w: the bundle's checkpoint (size %d) is not consistent with the live newest checkpoint (size %d): %v", ErrLiveMismatch, size, live.Size, err)
	}
	for i, e := range b.Entries {
		stored, err := hr.Leaf(e.Seq)
		if err != nil {
			return 0, fmt.Errorf("comparing with the live journal: %w", err)
		}
		if stored != b.Manifest.LeafHashes[i] {
			return 0, fmt.Errorf("%w: entry %d: the live journal's leaf hash is %s, the bundle's %s", ErrLiveMismatch, e.Seq, stored, b.Manifest.LeafHashes[i])
		}
	}
	return len(b.Entries), nil
}
