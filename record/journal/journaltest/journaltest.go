// Package journaltest opens real journals for the tests and benchmarks of
// the packages built on package journal: a fresh signing key, a journal in
// a temporary directory of the test, closed when the test ends.
//
// Package journal's own tests cannot use it (it imports journal); they
// have their own helpers.
package journaltest

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
)

// Keys returns a fresh checkpoint signer named name and the verifiers of
// its checkpoints.
func Keys(tb testing.TB, name string) (note.Signer, note.Verifiers) {
	tb.Helper()
	skey, vkey, err := journal.GenerateKey(name)
	if err != nil {
		tb.Fatalf("generating a journal key: %v", err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		tb.Fatalf("loading the journal key: %v", err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		tb.Fatalf("loading the journal verifier key: %v", err)
	}
	return s, note.VerifierList(v)
}

// Open opens a journal with opts in a fresh temporary directory, signed by
// a fresh key, and closes it when the test ends. It returns the journal
// and its directory.
func Open(tb testing.TB, opts ...journal.Option) (*journal.Journal, string) {
	tb.Helper()
	signer, _ := Keys(tb, "sandtrail-test")
	dir := filepath.Join(tb.TempDir(), "journal")
	j, err := journal.Open(dir, signer, opts...)
	if err != nil {
		tb.Fatalf("journal.Open() = %v", err)
	}
	tb.Cleanup(func() { _ = j.Close() })
	return j, dir
}

// Prune journals the record of pruning seqs (a retention.prune entry
// naming them, as the retention policy writes one) and has j prune them:
// the journal prunes only what such a record names.
func Prune(tb testing.TB, j *journal.Journal, seqs ...uint64) (journal.PruneResult, error) {
	tb.Helper()
	sorted := slices.Compact(slices.Sorted(slices.Values(seqs)))
	rec := &event.Event{V: event.SchemaVersion, TS: time.Now(), Kind: event.KindRetentionPrune, Source: event.SourceJournal,
		Retention: &event.Retention{Op: event.RetentionPrune, Entries: uint64(len(sorted)), Ranges: event.SeqRanges(sorted)}}
	if err := j.Append(context.Background(), rec); err != nil {
		tb.Fatal(err)
	}
	return j.Prune(context.Background(), seqs, []uint64{rec.Seq})
}
