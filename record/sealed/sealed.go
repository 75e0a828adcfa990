// Package sealed keeps the tool and model I/O that the policy keeps in
// full (tool_io verbosity full): each call's whole input and output,
// encrypted to the investigators' age recipients (filippo.io/age), in a
// content-addressed store beside the journal (<data_dir>/sealed/HEX, HEX
// the sha256 of the encrypted blob). The event that the call journals
// names its blob by that hash (tool.sealed_ref, "sha256:HEX"), so the
// journal's Merkle tree covers the blob too: a blob changed, swapped or
// removed after the fact fails Check, and sandtrail verify reports it.
//
// Trust model. The daemon seals; it holds only the recipients (public
// keys), never an identity, so nothing on the host can read a blob back.
// The store's directory is root's, 0700, and its blobs 0600: the agent can
// neither read the ciphertext nor plant one. Opening a blob needs an
// investigator's identity (Open), and sandtrail investigate unseal
// journals every opening before it happens.
package sealed

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"filippo.io/age"

	"github.com/sandtrail/sandtrail/record/atomicfile"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
)

// ErrTampered is returned when a blob's bytes no longer hash to its
// reference.
var ErrTampered = errors.New("sealed blob does not match its reference")

// ErrMissing is returned when the store has no blob for a reference.
var ErrMissing = errors.New("sealed blob missing")

// MaxBlob bounds a blob the store reads back: the I/O of one call, sealed.
// Seal refuses contents whose blob could be larger (maxPlain: age adds 16
// bytes to each 64 KiB chunk, and a header).
const (
	MaxBlob  = 64 << 20
	maxPlain = MaxBlob - MaxBlob/256
)

// Contents is what one blob holds, once opened: a call's whole input and
// output as the caller sent them, and which event they belong to.
type Contents struct {
	// Session and EventID name the event the blob was sealed for.
	Session string `json:"session"`
	EventID string `json:"event_id,omitempty"`
	Kind    string `json:"kind"`
	// Name is the tool's or the model's name.
	Name   string `json:"name,omitempty"`
	Input  string `json:"input"`
	Output string `json:"output"`
}

// ParseRecipients parses age recipients (ParseRecipient), naming the
// entry that is wrong.
func ParseRecipients(list []string) ([]age.Recipient, error) {
	out := make([]age.Recipient, 0, len(list))
	for i, s := range list {
		r, err := ParseRecipient(s)
		if err != nil {
			return nil, fmt.Errorf("recipient %d: %w", i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ParseRecipient parses one age recipient: X25519 (age1…) or hybrid
// post-quantum (age1pq1…). A pasted identity, a plugin recipient (which
// sealing cannot use without the plugin) or a typo is an error.
func ParseRecipient(s string) (age.Recipient, error) {
	if strings.HasPrefix(strings.ToUpper(s), "AGE-SECRET-KEY-") || strings.HasPrefix(strings.ToUpper(s), "AGE-PLUGIN-") {
		return nil, fmt.Errorf("%.16q… is an age identity (a secret key), not a recipient: give its public key (age-keygen -y)", s)
	}
	if strings.TrimSpace(s) != s || s == "" || strings.ContainsAny(s, "\n#") {
		return nil, fmt.Errorf("%q is not an age recipient: want age1…", event.Clip(s, 80))
	}
	rs, err := age.ParseRecipients(strings.NewReader(s))
	if err != nil || len(rs) != 1 {
		return nil, fmt.Errorf("%q is not an age recipient (X25519 age1… or hybrid age1pq1…): %v", event.Clip(s, 80), err)
	}
	return rs[0], nil
}

// ParseIdentities reads age identities (AGE-SECRET-KEY-1…, one per line,
// # comments allowed), as age-keygen writes them.
func ParseIdentities(r io.Reader) ([]age.Identity, error) {
	ids, err := age.ParseIdentities(r)
	if err != nil {
		return nil, fmt.Errorf("reading age identities: %w", err)
	}
	return ids, nil
}

// Recipient returns the public key of an X25519 or hybrid identity, or ""
// for another kind.
func Recipient(id age.Identity) string {
	switch k := id.(type) {
	case *age.X25519Identity:
		return k.Recipient().String()
	case *age.HybridIdentity:
		return k.Recipient().String()
	}
	return ""
}

// Store is the content-addressed store of sealed blobs.
type Store struct{ dir string }

// OpenStore opens (creating, 0700) the store in dir.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sealed store: %w", err)
	}
	return &Store{dir: dir}, nil
}

// StoreAt is the store in dir, without creating it: for readers.
func StoreAt(dir string) *Store { return &Store{dir: dir} }

// Dir is where the store keeps its blobs.
func (s *Store) Dir() string { return s.dir }

// Seal encrypts c to recipients and stores the blob, returning its
// reference ("sha256:HEX"). It writes the blob durably before it returns,
// so an event that names it never points at nothing.
func (s *Store) Seal(recipients []age.Recipient, c *Contents) (string, error) {
	if len(recipients) == 0 {
		return "", errors.New("sealing: no recipients")
	}
	var pb bytes.Buffer
	enc := json.NewEncoder(&pb)
	enc.SetEscapeHTML(false) // "<" stays one byte: the blob's size follows the I/O's
	if err := enc.Encode(c); err != nil {
		return "", err
	}
	plain := pb.Bytes()
	if len(plain) > maxPlain {
		return "", fmt.Errorf("sealing: %d bytes of I/O is over the %d a blob holds", len(plain), maxPlain)
	}
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, recipients...)
	if err != nil {
		return "", fmt.Errorf("sealing: %w", err)
	}
	if _, err := w.Write(plain); err != nil {
		return "", fmt.Errorf("sealing: %w", err)
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("sealing: %w", err)
	}
	sum := sha256.Sum256(buf.Bytes())
	h := hex.EncodeToString(sum[:])
	if err := atomicfile.WriteFile(filepath.Join(s.dir, h), buf.Bytes(), 0o600); err != nil {
		return "", fmt.Errorf("sealing: %w", err)
	}
	return "sha256:" + h, nil
}

// Get reads the blob ref names and checks that it still hashes to ref.
func (s *Store) Get(ref string) ([]byte, error) {
	h, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(s.dir, h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrMissing, ref)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxBlob+1))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	if len(b) > MaxBlob || hex.EncodeToString(sum[:]) != h {
		return nil, fmt.Errorf("%w: %s", ErrTampered, ref)
	}
	return b, nil
}

// Check reports whether the blob ref names is present and intact.
func (s *Store) Check(ref string) error {
	_, err := s.Get(ref)
	return err
}

// Open decrypts a blob with the investigator's identities. A blob sealed
// to other recipients fails with age's age.NoIdentityMatchError.
func Open(blob []byte, ids []age.Identity) (*Contents, error) {
	r, err := age.Decrypt(bytes.NewReader(blob), ids...)
	if err != nil {
		return nil, fmt.Errorf("opening sealed blob: %w", err)
	}
	plain, err := io.ReadAll(io.LimitReader(r, MaxBlob+1))
	if err != nil {
		return nil, fmt.Errorf("opening sealed blob: %w", err)
	}
	var c Contents
	if err := json.Unmarshal(plain, &c); err != nil {
		return nil, fmt.Errorf("opening sealed blob: its contents are not sandtrail's: %w", err)
	}
	return &c, nil
}

// parseRef returns the hex hash of a "sha256:HEX" reference.
func parseRef(ref string) (string, error) {
	h, ok := strings.CutPrefix(ref, "sha256:")
	if !ok || len(h) != 64 || strings.ToLower(h) != h {
		return "", fmt.Errorf("sealed reference %q: want sha256: and 64 lower-case hex digits", event.Clip(ref, 80))
	}
	if _, err := hex.DecodeString(h); err != nil {
		return "", fmt.Errorf("sealed reference %q: want sha256: and 64 lower-case hex digits", event.Clip(ref, 80))
	}
	return h, nil
}

// CheckJournal checks every blob that the events of the journal in
// journalDir name (tool.sealed_ref, model.sealed_ref): present, and still
// hashing to its reference. It returns how many it checked, and a problem
// for each that fails; err is for a journal it cannot read.
func (s *Store) CheckJournal(journalDir string) (checked int, bad []journal.Problem, err error) {
	err = eachSealed(journalDir, func(seq uint64, _ *event.Event, ref string) {
		checked++
		if err := s.Check(ref); err != nil {
			bad = append(bad, journal.Problem{Seq: &seq, Msg: err.Error()})
		}
	})
	return checked, bad, err
}

// eachSealed calls fn with each event of the journal in journalDir that
// names a sealed blob, in seq order. Entries that do not decode are
// verify's to report.
func eachSealed(journalDir string, fn func(seq uint64, e *event.Event, ref string)) error {
	return journal.Scan(journalDir, 0, func(seq uint64, raw []byte) error {
		if !bytes.Contains(raw, []byte(`"sealed_ref"`)) {
			return nil
		}
		e, err := event.DecodeStored(raw)
		if err != nil {
			return nil
		}
		if ref := refOf(e); ref != "" {
			e.Seq = seq
			fn(seq, e, ref)
		}
		return nil
	})
}

// Sealed is one journaled event whose I/O is sealed.
type Sealed struct {
	Seq   uint64
	Event *event.Event
	Ref   string
}

// Find returns the events of session in the journal in journalDir whose
// I/O is sealed, in seq order: those of seqs, or all of them when seqs is
// empty. A seq of seqs that names no sealed event of the session is an
// error.
func Find(journalDir, session string, seqs []uint64) ([]Sealed, error) {
	want := map[uint64]bool{}
	for _, s := range seqs {
		want[s] = true
	}
	all := len(seqs) == 0
	var out []Sealed
	err := eachSealed(journalDir, func(seq uint64, e *event.Event, ref string) {
		if (all || want[seq]) && e.SessionID == session {
			out = append(out, Sealed{Seq: seq, Event: e, Ref: ref})
			delete(want, seq)
		}
	})
	if err != nil {
		return nil, err
	}
	for s := range want {
		return nil, fmt.Errorf("seq %d is not a sealed event of session %s", s, session)
	}
	return out, nil
}

// refOf is the sealed reference of a tool or model event, or "".
func refOf(e *event.Event) string {
	if io := ioOf(e); io != nil {
		return io.SealedRef
	}
	return ""
}

// ioOf is the I/O of a tool or model event, or nil.
func ioOf(e *event.Event) *event.IO {
	switch {
	case e.Tool != nil:
		return &e.Tool.IO
	case e.Model != nil:
		return &e.Model.IO
	}
	return nil
}

func hexSum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// OpenEach reads and opens the blob of each of items with one of ids,
// returning the contents in the same order and the recipient of the
// identity that opened them. Nothing is returned unless every blob is
// intact and opens: an investigator sees a session's I/O whole or not at
// all, and the caller journals the unseal before showing it.
func (s *Store) OpenEach(items []Sealed, ids []age.Identity) ([]*Contents, string, error) {
	out := make([]*Contents, len(items))
	recipients := map[string]bool{}
	for i, it := range items {
		blob, err := s.Get(it.Ref)
		if err != nil {
			return nil, "", fmt.Errorf("seq %d: %w", it.Seq, err)
		}
		var opened bool
		for _, id := range ids {
			c, err := Open(blob, []age.Identity{id})
			if err != nil {
				continue
			}
			if c.Session != it.Event.SessionID || c.EventID != it.Event.EventID {
				return nil, "", fmt.Errorf("seq %d: %w: the blob was sealed for event %s of session %s", it.Seq, ErrTampered, c.EventID, c.Session)
			}
			if io := ioOf(it.Event); io != nil && (io.InputSHA256 != "" && io.InputSHA256 != hexSum(c.Input) || io.OutputSHA256 != "" && io.OutputSHA256 != hexSum(c.Output)) {
				// Another call's blob under this event's id: the event's
				// hashes of the whole I/O tell them apart.
				return nil, "", fmt.Errorf("seq %d: %w: the blob's I/O does not hash to the event's input_sha256 and output_sha256", it.Seq, ErrTampered)
			}
			out[i], opened = c, true
			recipients[Recipient(id)] = true
			break
		}
		if !opened {
			return nil, "", fmt.Errorf("seq %d: the identity does not open %s: it was sealed to other recipients", it.Seq, it.Ref)
		}
	}
	var names []string
	for r := range recipients {
		names = append(names, r)
	}
	slices.Sort(names)
	return out, strings.Join(names, " "), nil
}
