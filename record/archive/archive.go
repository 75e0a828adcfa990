// Package archive is the journal's cold tier: a sealed bundle per session,
// kept in a directory or pushed to an OCI registry, that proves itself.
//
// A bundle (Seal) holds every entry of one session, byte for byte as the
// journal stores it with its seq, an RFC 6962 inclusion proof of each entry
// in the tree of one signed checkpoint that covers them all, that checkpoint
// note, and a manifest (session, origin, seqs, leaf hashes, checkpoint size
// and root, the digests of the parts). It is a gzip-compressed tar of four
// files in a fixed order (docs/archive.md has the format).
//
// Trust model. A bundle is untrusted bytes wherever it was kept: Parse bounds
// what it reads and checks only the layout, and Bundle.Verify fails closed
// unless every claim holds: the checkpoint is signed by one of the caller's
// verifier keys (as sandtrail verify loads them), each entry's leaf hash is
// the manifest's and its proof verifies against the signed root, the
// manifest agrees with the entries, and every entry decodes and belongs to
// the session. The stores are not trusted either: a registry or a directory
// that alters, swaps or truncates a bundle makes it fail to verify. What a
// bundle cannot prove alone is that it holds every entry of its session (a
// log has no proof of absence), nor that the signer's key was not misused:
// it is as good as the checkpoint key. VerifyLive also ties the bundle to the
// journal it came from: the live journal's stored leaf hashes at the
// bundle's seqs must equal the bundle's, and the bundle's checkpoint must be
// consistent (a consistency proof from the live hash file, checked against
// both signed roots) with the live journal's newest checkpoint. It reads only
// the hash file and the checkpoints, never the entries' bodies, so it still
// works once the entries were pruned to their leaf hashes.
package archive

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"golang.org/x/mod/sumdb/tlog"
)

// Errors returned by the package. Each is wrapped with detail.
var (
	// ErrMalformed means the bytes are not a bundle: bad compression, an
	// unexpected tar layout, a part over its size limit, or a manifest or
	// proof file that does not decode.
	ErrMalformed = errors.New("archive: malformed bundle")
	// ErrTampered means a bundle does not verify: a bad signature, an entry
	// whose hash or proof does not match, or a manifest that disagrees with
	// what the bundle holds.
	ErrTampered = errors.New("archive: bundle does not verify")
	// ErrLiveMismatch means a bundle that verifies alone disagrees with the
	// live journal: another leaf hash at one of its seqs, or a checkpoint
	// inconsistent with the journal's newest one.
	ErrLiveMismatch = errors.New("archive: bundle does not match the live journal")
	// ErrNotCovered means no signed checkpoint covers the session's last
	// entry yet, so nothing can be sealed.
	ErrNotCovered = errors.New("archive: session not covered by a signed checkpoint")
	// ErrNoSession means the journal holds no entry of the session.
	ErrNoSession = errors.New("archive: no entries for session")
	// ErrIndexMismatch means the index names an entry of the session that
	// the journal does not hold (pruned since, or a stale index): Seal
	// refuses to seal fewer entries than the index knows of.
	ErrIndexMismatch = errors.New("archive: the index and the journal disagree")
	// ErrBadSession means a session id cannot name a bundle (a file or a
	// tag).
	ErrBadSession = errors.New("archive: invalid session id")
	// ErrNotFound means a store holds no bundle for the key.
	ErrNotFound = errors.New("archive: no such bundle")
)

// The bundle format and its OCI media types.
const (
	// Format is the manifest's format version.
	Format = "sandtrail.session-bundle.v1"
	// ArtifactType is the OCI artifactType of a pushed bundle's manifest.
	ArtifactType = "application/vnd.sandtrail.session-bundle.v1"
	// LayerMediaType is the media type of the one layer: the bundle file.
	LayerMediaType = "application/vnd.sandtrail.session-bundle.v1.tar+gzip"
	// FileSuffix ends a bundle's file name: <session>.bundle.tar.gz.
	FileSuffix = ".bundle.tar.gz"
)

// The names of the bundle's files, in their order in the tar.
const (
	manifestName   = "manifest.json"
	checkpointName = "checkpoint"
	entriesName    = "entries.jsonl"
	proofsName     = "proofs.json"
)

// sessionRE is what a session id must look like to name a bundle: the
// session manager's ids, and an OCI tag's grammar.
var sessionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// CheckSession returns an error wrapping ErrBadSession unless id can name
// a bundle file and an OCI tag.
func CheckSession(id string) error {
	if !sessionRE.MatchString(id) {
		return fmt.Errorf("%w: %q: want 1 to 128 of A-Z a-z 0-9 _ . -, beginning with a letter or digit", ErrBadSession, event.Clip(id, 80))
	}
	return nil
}

// Manifest describes what a bundle holds. Every field is checked by Verify.
type Manifest struct {
	Format    string `json:"format"`
	SessionID string `json:"session_id"`
	// Origin is the checkpoint's origin line, the journal's name.
	Origin string `json:"origin"`
	// Hosts are the distinct host fields of the entries, sorted.
	Hosts   []string  `json:"hosts"`
	Created time.Time `json:"created"`
	Entries int       `json:"entries"`
	// Seqs are the entries' seqs as inclusive ranges [first, last], in
	// order, neither overlapping nor touching.
	Seqs []SeqRange `json:"seqs"`
	// LeafHashes are the entries' RFC 6962 leaf hashes, in seq order.
	LeafHashes  []tlog.Hash   `json:"leaf_hashes"`
	Checkpoint  CheckpointRef `json:"checkpoint"`
	EntriesBlob Blob          `json:"entries_blob"`
	ProofsBlob  Blob          `json:"proofs_blob"`
}

// SeqRange is an inclusive range of seqs, [first, last] in JSON.
type SeqRange [2]uint64

// CheckpointRef is the signed tree the proofs are against.
type CheckpointRef struct {
	Size uint64    `json:"size"`
	Root tlog.Hash `json:"root"`
}

// Blob names one file of the bundle with its size and digest.
type Blob struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
}

// Entry is one journal entry of a bundle.
type Entry struct {
	Seq uint64
	// Raw is the canonical encoding, the Merkle leaf data.
	Raw []byte
}

// Proof is the inclusion proof of one entry.
type Proof struct {
	Seq    uint64      `json:"seq"`
	Hashes []tlog.Hash `json:"hashes"`
}

// Bundle is a sealed session bundle: its bytes and what they hold. A
// Bundle from Parse has been checked for layout only: call Verify.
type Bundle struct {
	Manifest Manifest
	// Checkpoint is the signed checkpoint note.
	Checkpoint []byte
	Entries    []Entry
	Proofs     []Proof

	data    []byte
	digest  string
	entries []byte // the entries blob as stored
	proofs  []byte // the proofs blob as stored
}

// Bytes returns the bundle file.
func (b *Bundle) Bytes() []byte { return b.data }

// Digest returns the bundle file's digest, "sha256:<hex>".
func (b *Bundle) Digest() string { return b.digest }

// Session returns the bundle's session id, as its manifest says.
func (b *Bundle) Session() string { return b.Manifest.SessionID }

// FileName returns the bundle's file name in a directory store.
func FileName(session string) string { return session + FileSuffix }
