package archive

import (
	"context"
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

// Archive seals the session (Seal), stores the bundle, then reads it back
// from the store and checks that it is the same bundle and that it
// verifies against the live journal. Once Archive returns nil the store
// holds a bundle that proves every entry of the session the journal held:
// the session may be pruned. Its errors are Seal's, the store's, or wrap
// ErrTampered when the store gave back another bundle.
func (a *Archiver) Archive(ctx context.Context, session string) (Stored, error) {
	b, err := Seal(ctx, a.dir, a.ix, session, a.verifiers, a.opts...)
	if err != nil {
		return Stored{}, err
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
