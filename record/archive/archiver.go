package archive

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/index"
)

// Archiver seals the sessions of one journal into one store: what the
// retention code calls before it prunes a session.
type Archiver struct {
	dir       string
	ix        *index.Index
	verifiers note.Verifiers
	store     Store
	opts      []SealOption
}

// NewArchiver returns an Archiver of the journal in journalDir (with its
// index, or nil) into store, checking checkpoints with verifiers.
func NewArchiver(journalDir string, ix *index.Index, verifiers note.Verifiers, store Store, opts ...SealOption) *Archiver {
	return &Archiver{dir: journalDir, ix: ix, verifiers: verifiers, store: store, opts: opts}
}

// Archive makes sure the store holds a bundle of every entry of the session
// that the journal holds, verified against the live journal; once it
// returns nil the session may be pruned. It seals the session (Seal),
// stores the bundle, then reads it back from the store and checks that it
// is the same bundle and that it verifies live.
//
// It is idempotent, and safe to call again after a prune of the session
// was interrupted: when the store already holds a bundle of the session
// that verifies live, it keeps that bundle (Stored.Kept) if the journal
// now holds no more of the session's entries (none at all, fewer than the
// index names, or a subset of the stored bundle's), and replaces it only
// with one that holds every entry it held and more (entries journaled for
// the session since, as a later alert). A stored bundle and a journal that
// each hold entries the other lacks are an error.
//
// Its errors are Seal's, the store's, or wrap ErrTampered when the store
// gives back another bundle than it was given.
func (a *Archiver) Archive(ctx context.Context, session string) (Stored, error) {
	b, serr := Seal(ctx, a.dir, a.ix, session, a.verifiers, a.opts...)
	old, err := a.storedLive(ctx, session)
	if err != nil {
		return Stored{}, err
	}
	switch {
	case serr != nil && old != nil && (errors.Is(serr, ErrNoSession) || errors.Is(serr, ErrIndexMismatch)):
		return kept(old), nil
	case serr != nil:
		return Stored{}, serr
	case old != nil && holds(old, b):
		return kept(old), nil
	case old != nil && !holds(b, old):
		return Stored{}, fmt.Errorf("archive: session %s: the stored bundle %s and the journal each hold entries the other lacks: keeping the stored one, archiving nothing", session, old.Digest())
	}
	st, err := a.store.Put(ctx, b)
	if err != nil {
		return Stored{}, err
	}
	back, err := a.store.Get(ctx, session)
	if err != nil {
		return Stored{}, fmt.Errorf("reading back the bundle of %s: %w", session, err)
	}
	if back.Digest() != b.Digest() {
		return Stored{}, fmt.Errorf("%w: the store gave back bundle %s for %s, not the %s it was given", ErrTampered, back.Digest(), session, b.Digest())
	}
	if _, err := back.VerifyLive(a.dir, a.verifiers); err != nil {
		return Stored{}, fmt.Errorf("verifying the stored bundle of %s: %w", session, err)
	}
	return st, nil
}

// HoldsEntries checks that the store's bundle of session holds every
// entry of seqs, as retention checks before it prunes them: a bundle
// kept from an earlier Archive may lack entries journaled since.
func (a *Archiver) HoldsEntries(ctx context.Context, session string, seqs []uint64) error {
	b, err := a.store.Get(ctx, session)
	if err != nil {
		return fmt.Errorf("reading the stored bundle of %s: %w", session, err)
	}
	in := make(map[uint64]bool, len(b.Entries))
	for _, e := range b.Entries {
		in[e.Seq] = true
	}
	for _, seq := range seqs {
		if !in[seq] {
			return fmt.Errorf("archive: the stored bundle %s of %s lacks entry %d, which is to be pruned", b.Digest(), session, seq)
		}
	}
	return nil
}

// storedLive returns the store's bundle of the session if it has one that
// verifies against the live journal, or nil.
func (a *Archiver) storedLive(ctx context.Context, session string) (*Bundle, error) {
	b, err := a.store.Get(ctx, session)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case errors.Is(err, ErrMalformed) || errors.Is(err, ErrTampered):
		return nil, nil // a bad stored bundle counts as none: a good one replaces it
	case err != nil:
		return nil, fmt.Errorf("reading the stored bundle of %s: %w", session, err)
	}
	if b.Session() != session {
		return nil, nil
	}
	if _, err := b.VerifyLive(a.dir, a.verifiers); err != nil {
		return nil, nil
	}
	return b, nil
}

// holds reports whether a holds every entry of b (by seq and leaf hash).
func holds(a, b *Bundle) bool {
	leaves := make(map[uint64]int, len(a.Entries))
	for i, e := range a.Entries {
		leaves[e.Seq] = i
	}
	for i, e := range b.Entries {
		j, ok := leaves[e.Seq]
		if !ok || a.Manifest.LeafHashes[j] != b.Manifest.LeafHashes[i] {
			return false
		}
	}
	return true
}

// kept describes a stored bundle that Archive kept.
func kept(b *Bundle) Stored {
	return Stored{SessionID: b.Session(), Digest: b.Digest(), Size: int64(len(b.Bytes())), Created: b.Manifest.Created,
		CheckpointSize: b.Manifest.Checkpoint.Size, Kept: true}
}
