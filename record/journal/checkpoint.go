package journal

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/sandtrail/sandtrail/record/atomicfile"
	"github.com/sandtrail/sandtrail/record/event"
)

// Checkpoint is a signed statement of the journal's tree: its size and root
// hash. Text is the whole signed note, whose text is a C2SP tlog-checkpoint
// body:
//
//	<origin>
//	<size, decimal>
//	<root hash, standard base64>
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   tlog.Hash
	Text   []byte
}

// maxCheckpointSize bounds a checkpoint note read from disk or a caller.
const maxCheckpointSize = 64 << 10

// checkpointBody returns the C2SP tlog-checkpoint body.
func checkpointBody(origin string, size uint64, root tlog.Hash) string {
	return origin + "\n" + strconv.FormatUint(size, 10) + "\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n"
}

// parseBody parses a C2SP tlog-checkpoint body. Extension lines after the
// root hash are allowed and ignored, as the spec requires; the three
// mandatory lines must be exact (no leading zeros, canonical base64).
func parseBody(text string) (origin string, size uint64, root tlog.Hash, err error) {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) < 4 || lines[len(lines)-1] != "" {
		return "", 0, root, fmt.Errorf("%w: want origin, size and root hash lines", ErrBadCheckpoint)
	}
	for _, l := range lines[:len(lines)-1] {
		if l == "\n" {
			return "", 0, root, fmt.Errorf("%w: empty line", ErrBadCheckpoint)
		}
	}
	origin = strings.TrimSuffix(lines[0], "\n")
	sizeStr := strings.TrimSuffix(lines[1], "\n")
	rootStr := strings.TrimSuffix(lines[2], "\n")
	size, err = strconv.ParseUint(sizeStr, 10, 64)
	if err != nil || strconv.FormatUint(size, 10) != sizeStr {
		return "", 0, root, fmt.Errorf("%w: size %q is not a decimal number", ErrBadCheckpoint, event.Clip(sizeStr, 32))
	}
	b, err := base64.StdEncoding.DecodeString(rootStr)
	if err != nil || len(b) != tlog.HashSize || base64.StdEncoding.EncodeToString(b) != rootStr {
		return "", 0, root, fmt.Errorf("%w: root hash %q is not 32 bytes of base64", ErrBadCheckpoint, event.Clip(rootStr, 64))
	}
	copy(root[:], b)
	return origin, size, root, nil
}

// ParseCheckpoint opens the signed checkpoint note msg, checks its
// signatures against verifiers, and parses its body. Every signature must
// be by one of verifiers: a signature by an unknown key is an error wrapping
// ErrUnknownKey, and a bad signature one wrapping ErrBadSignature. Other
// malformations wrap ErrBadCheckpoint.
func ParseCheckpoint(msg []byte, verifiers note.Verifiers) (*Checkpoint, error) {
	return parseCheckpoint(msg, verifiers, true)
}

// parseCheckpoint is ParseCheckpoint; with strict false it accepts extra
// signatures by unknown keys (witness cosignatures on a held checkpoint) as
// long as one known key signed.
func parseCheckpoint(msg []byte, verifiers note.Verifiers, strict bool) (*Checkpoint, error) {
	if len(msg) > maxCheckpointSize {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrBadCheckpoint, len(msg), maxCheckpointSize)
	}
	if verifiers == nil {
		verifiers = note.VerifierList()
	}
	n, err := note.Open(msg, verifiers)
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return nil, fmt.Errorf("%w: %s", ErrUnknownKey, sigNames(unverified.Note.UnverifiedSigs))
		case errors.As(err, &invalid):
			return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrBadCheckpoint, err)
	}
	if strict && len(n.UnverifiedSigs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnknownKey, sigNames(n.UnverifiedSigs))
	}
	origin, size, root, err := parseBody(n.Text)
	if err != nil {
		return nil, err
	}
	return &Checkpoint{Origin: origin, Size: size, Root: root, Text: bytes.Clone(msg)}, nil
}

func sigNames(sigs []note.Signature) string {
	var b strings.Builder
	b.WriteString("signed by ")
	for i, s := range sigs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s+%08x", s.Name, s.Hash)
	}
	if len(sigs) == 0 {
		b.WriteString("no key")
	}
	return b.String()
}

// parseUnverified parses a checkpoint's body without checking signatures.
// The writer uses it at Open for its own latest checkpoint, whose key it
// holds only as a signer.
func parseUnverified(msg []byte) (*Checkpoint, error) {
	if len(msg) > maxCheckpointSize {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrBadCheckpoint, len(msg), maxCheckpointSize)
	}
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 {
		return nil, fmt.Errorf("%w: no signature block", ErrBadCheckpoint)
	}
	origin, size, root, err := parseBody(string(msg[:i+1]))
	if err != nil {
		return nil, err
	}
	return &Checkpoint{Origin: origin, Size: size, Root: root, Text: bytes.Clone(msg)}, nil
}

// signCheckpoint signs a checkpoint of size and root.
func signCheckpoint(signer note.Signer, origin string, size uint64, root tlog.Hash) (*Checkpoint, error) {
	msg, err := note.Sign(&note.Note{Text: checkpointBody(origin, size, root)}, signer)
	if err != nil {
		return nil, fmt.Errorf("signing checkpoint: %w", err)
	}
	return &Checkpoint{Origin: origin, Size: size, Root: root, Text: msg}, nil
}

func checkpointName(size uint64) string { return fmt.Sprintf("%012d", size) }

func parseCheckpointName(name string) (uint64, bool) {
	n, err := strconv.ParseUint(name, 10, 64)
	if err != nil || checkpointName(n) != name {
		return 0, false
	}
	return n, true
}

// storeCheckpoint writes cp as checkpoints/<size> and checkpoints/latest,
// each atomically and durably (record/atomicfile).
func storeCheckpoint(dir string, cp *Checkpoint) error {
	d := filepath.Join(dir, cpDir)
	for _, name := range []string{checkpointName(cp.Size), cpLatest} {
		if err := atomicfile.WriteFile(filepath.Join(d, name), cp.Text, 0o644); err != nil {
			return fmt.Errorf("storing checkpoint: %w", err)
		}
	}
	return nil
}

// storedCheckpoint is one checkpoint file of a journal directory.
type storedCheckpoint struct {
	name string // file name inside checkpoints/
	size uint64 // the size its name claims; 0 for latest
	text []byte
}

// readCheckpoints reads the latest checkpoint file of dir and every other
// one for which want (nil for all) returns true, given the size its name
// claims. Temporary files left by a crash are skipped; any other
// unexpected name is returned in bad.
func readCheckpoints(dir string, want func(size uint64) bool) (files []storedCheckpoint, bad []string, err error) {
	d := filepath.Join(dir, cpDir)
	ents, err := os.ReadDir(d)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing checkpoints: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			continue
		}
		size, ok := parseCheckpointName(name)
		if name == cpLatest {
			ok = true
		}
		if !ok || !e.Type().IsRegular() {
			bad = append(bad, name)
			continue
		}
		if want != nil && name != cpLatest && !want(size) {
			continue
		}
		text, err := readLimited(filepath.Join(d, name), maxCheckpointSize)
		if err != nil {
			return nil, nil, fmt.Errorf("reading checkpoint: %w", err)
		}
		files = append(files, storedCheckpoint{name: name, size: size, text: text})
	}
	return files, bad, nil
}

// readLimited reads a whole file, refusing one larger than limit.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes, over %d", ErrBadCheckpoint, path, st.Size(), limit)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, err
	}
	return b, nil
}

// ReadCheckpoint reads and checks the checkpoint note in file (for example
// one shipped off-host, or <dir>/checkpoints/latest) against verifiers.
// Errors are as for ParseCheckpoint, or wrap the read error.
func ReadCheckpoint(file string, verifiers note.Verifiers) (*Checkpoint, error) {
	b, err := readLimited(file, maxCheckpointSize)
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint: %w", err)
	}
	cp, err := ParseCheckpoint(b, verifiers)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", file, err)
	}
	return cp, nil
}

// LatestCheckpoint returns the journal's latest stored checkpoint, checked
// against verifiers. It returns an error wrapping ErrNotFound when the
// journal has signed none.
func LatestCheckpoint(dir string, verifiers note.Verifiers) (*Checkpoint, error) {
	file := filepath.Join(dir, cpDir, cpLatest)
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: no checkpoint in %s", ErrNotFound, dir)
	}
	return ReadCheckpoint(file, verifiers)
}

// LatestCheckpointNote returns the journal's latest stored checkpoint as
// stored, with its size read from its body and its signature unchecked:
// for carrying it off-host (a sink), where whoever holds it checks the
// signature (Verify's held checkpoints). It returns an error wrapping
// ErrNotFound when the journal has signed none.
func LatestCheckpointNote(dir string) (*Checkpoint, error) {
	file := filepath.Join(dir, cpDir, cpLatest)
	b, err := readLimited(file, maxCheckpointSize)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: no checkpoint in %s", ErrNotFound, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint: %w", err)
	}
	return parseUnverified(b)
}
