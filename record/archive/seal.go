package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/query"
)

// SealOption configures Seal.
type SealOption func(*sealOptions)

type sealOptions struct {
	created time.Time
}

// WithCreated sets the manifest's created time (default now).
func WithCreated(t time.Time) SealOption { return func(o *sealOptions) { o.created = t } }

// notCoveredAdvice says how to get a checkpoint signed.
const notCoveredAdvice = "the journal signs one within checkpoint.interval (1s) while entries arrive, after a session.terminate, and when the daemon stops: retry once the session has ended or the daemon has signed"

// Seal seals the session's entries in the journal at journalDir into a
// bundle. The journal decides what is the session's: every entry whose
// session_id is session. With ix (an index of the journal; nil for none)
// Seal reads only the seqs from the session's first to its last indexed
// entry, and the journal's tail that the index has not handled yet, and
// checks that every entry the index names is the session's; without, it
// scans the whole journal.
//
// The proofs are against the journal's newest checkpoint, which must be
// signed by one of verifiers and cover the session's last entry. Seal
// checks each proof against the checkpoint's root with the leaf hash of
// the entry itself, and verifies the bundle it made before returning it.
//
// Errors wrap ErrBadSession, ErrNoSession, ErrNotCovered (no signed
// checkpoint covers the last entry), ErrIndexMismatch, journal.ErrCorrupt
// (an entry does not match the checkpoint), or the
// journal's checkpoint errors (journal.ErrBadSignature, ErrUnknownKey,
// ErrBadCheckpoint).
func Seal(ctx context.Context, journalDir string, ix *index.Index, session string, verifiers note.Verifiers, opts ...SealOption) (*Bundle, error) {
	o := sealOptions{created: time.Now()}
	for _, opt := range opts {
		opt(&o)
	}
	if err := CheckSession(session); err != nil {
		return nil, err
	}
	want, spans, err := plan(ctx, ix, session)
	if err != nil {
		return nil, err
	}
	entries, hosts, err := collect(journalDir, session, spans)
	if err != nil {
		return nil, err
	}
	if err := matchIndex(entries, want, session); err != nil {
		return nil, err
	}
	cp, err := coveringCheckpoint(journalDir, verifiers, session, entries[len(entries)-1].Seq)
	if err != nil {
		return nil, err
	}
	proofs, leaves, err := prove(journalDir, cp, entries)
	if err != nil {
		return nil, err
	}
	return assemble(cp, session, hosts, o.created, entries, proofs, leaves, verifiers)
}

// span is an inclusive range of seqs to read, to ^uint64(0) for the end.
type span struct{ from, to uint64 }

// plan returns the seqs of the session's entries that ix holds, in order,
// and the spans of the journal to read: the whole journal without an
// index; with one, from the session's first indexed entry to its last,
// and the tail the index has not handled (so that an index that lags
// cannot leave the session's newest entries out).
func plan(ctx context.Context, ix *index.Index, session string) ([]uint64, []span, error) {
	const end = ^uint64(0)
	if ix == nil {
		return nil, []span{{0, end}}, nil
	}
	var seqs []uint64
	err := ix.Each(ctx, query.Filter{Session: session}, func(h index.Hit) error {
		seqs = append(seqs, h.Seq)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("looking up session %s in the index: %w", session, err)
	}
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	var tail uint64
	if last, ok := ix.Last(); ok {
		tail = last + 1
	}
	switch {
	case len(seqs) == 0:
		return nil, []span{{tail, end}}, nil
	case tail <= seqs[len(seqs)-1]+1:
		return seqs, []span{{seqs[0], end}}, nil
	}
	return seqs, []span{{seqs[0], seqs[len(seqs)-1]}, {tail, end}}, nil
}

// errScanned stops a scan past the end of a span.
var errScanned = errors.New("archive: scanned")

// collect reads the session's entries in spans (in order, disjoint) from
// the journal, and returns them with the distinct hosts they name, sorted.
func collect(dir, session string, spans []span) ([]Entry, []string, error) {
	needle := []byte(`"session_id":"` + session + `"`)
	var entries []Entry
	var hosts []string
	for _, sp := range spans {
		err := journal.Scan(dir, sp.from, func(seq uint64, raw []byte) error {
			if seq > sp.to {
				return errScanned
			}
			if !bytes.Contains(raw, needle) {
				return nil
			}
			ev, err := event.DecodeStored(raw)
			if err != nil || ev.SessionID != session {
				return nil
			}
			if bytes.IndexByte(raw, '\n') >= 0 {
				return fmt.Errorf("%w: entry %d holds a newline, which no canonical encoding does", journal.ErrCorrupt, seq)
			}
			if len(entries) == MaxEntries {
				return fmt.Errorf("session %s has more entries than a bundle holds (%d)", session, MaxEntries)
			}
			entries = append(entries, Entry{Seq: seq, Raw: bytes.Clone(raw)})
			if ev.Host != "" && !slices.Contains(hosts, ev.Host) {
				hosts = append(hosts, ev.Host)
			}
			return nil
		})
		if err != nil && !errors.Is(err, errScanned) {
			return nil, nil, fmt.Errorf("reading the journal: %w", err)
		}
	}
	if len(entries) == 0 {
		return nil, nil, fmt.Errorf("%w %s in the journal %s", ErrNoSession, session, dir)
	}
	slices.Sort(hosts)
	return entries, hosts, nil
}

// matchIndex checks that every seq the index names for the session is
// among the session's entries in the journal.
func matchIndex(entries []Entry, want []uint64, session string) error {
	i := 0
	for _, s := range want {
		for i < len(entries) && entries[i].Seq < s {
			i++
		}
		if i == len(entries) || entries[i].Seq != s {
			return fmt.Errorf("%w: it names entry %d as session %s's, but the journal holds no such entry of the session (pruned since, or a stale index: run sandtrail reindex)", ErrIndexMismatch, s, session)
		}
	}
	return nil
}

// coveringCheckpoint returns the journal's newest checkpoint, signed by one
// of verifiers, which must cover entry last.
func coveringCheckpoint(dir string, verifiers note.Verifiers, session string, last uint64) (*journal.Checkpoint, error) {
	cp, err := journal.LatestCheckpoint(dir, verifiers)
	if errors.Is(err, journal.ErrNotFound) {
		return nil, fmt.Errorf("%w: session %s ends at seq %d and the journal has signed no checkpoint yet: %s", ErrNotCovered, session, last, notCoveredAdvice)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the newest checkpoint: %w", err)
	}
	if cp.Size <= last {
		return nil, fmt.Errorf("%w: session %s ends at seq %d, and the newest checkpoint covers entries 0 to %d only: %s", ErrNotCovered, session, last, int64(cp.Size)-1, notCoveredAdvice)
	}
	return cp, nil
}

// prove returns each entry's inclusion proof in cp's tree, built from the
// hash file and checked against cp's root with the entry's own leaf hash,
// and the leaf hashes.
func prove(dir string, cp *journal.Checkpoint, entries []Entry) ([]Proof, []tlog.Hash, error) {
	hr, err := journal.OpenStoredHashes(dir, cp.Size)
	if err != nil {
		return nil, nil, err
	}
	defer hr.Close()
	proofs := make([]Proof, len(entries))
	leaves := make([]tlog.Hash, len(entries))
	for i, e := range entries {
		p, err := tlog.ProveRecord(int64(cp.Size), int64(e.Seq), hr)
		if err != nil {
			return nil, nil, fmt.Errorf("proving entry %d: %w", e.Seq, err)
		}
		leaves[i] = journal.LeafHash(e.Raw)
		if err := tlog.CheckRecord(p, int64(cp.Size), cp.Root, int64(e.Seq), leaves[i]); err != nil {
			return nil, nil, fmt.Errorf("%w: entry %d does not verify against the checkpoint of size %d (run sandtrail verify): %v", journal.ErrCorrupt, e.Seq, cp.Size, err)
		}
		proofs[i] = Proof{Seq: e.Seq, Hashes: append([]tlog.Hash{}, p...)}
	}
	return proofs, leaves, nil
}

// assemble writes the bundle file and reads it back through Parse and
// Verify, so that what Seal returns is what a reader will check.
func assemble(cp *journal.Checkpoint, session string, hosts []string, created time.Time, entries []Entry, proofs []Proof, leaves []tlog.Hash, verifiers note.Verifiers) (*Bundle, error) {
	var blob bytes.Buffer
	seqs := make([]uint64, len(entries))
	for i, e := range entries {
		blob.Write(e.Raw)
		blob.WriteByte('\n')
		seqs[i] = e.Seq
	}
	pj, err := json.Marshal(proofs)
	if err != nil {
		return nil, fmt.Errorf("encoding proofs: %w", err)
	}
	// The manifest takes under 64 bytes an entry (a leaf hash, a range).
	if n := blob.Len() + len(pj) + 64*len(entries) + 64<<10; n > MaxBundleSize {
		return nil, fmt.Errorf("session %s is too large for one bundle: about %d bytes, over %d", session, n, MaxBundleSize)
	}
	if hosts == nil {
		hosts = []string{}
	}
	m := &Manifest{Format: Format, SessionID: session, Origin: cp.Origin, Hosts: hosts,
		Created: created.UTC().Truncate(time.Second), Entries: len(entries), Seqs: ranges(seqs), LeafHashes: leaves,
		Checkpoint:  CheckpointRef{Size: cp.Size, Root: cp.Root},
		EntriesBlob: Blob{Name: entriesName, Size: int64(blob.Len()), Digest: digestOf(blob.Bytes())},
		ProofsBlob:  Blob{Name: proofsName, Size: int64(len(pj)), Digest: digestOf(pj)}}
	data, err := encode(m, cp.Text, blob.Bytes(), pj)
	if err != nil {
		return nil, err
	}
	b, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("reading back the sealed bundle: %w", err)
	}
	if _, err := b.Verify(verifiers); err != nil {
		return nil, fmt.Errorf("verifying the sealed bundle: %w", err)
	}
	return b, nil
}
