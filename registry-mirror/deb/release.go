package deb

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/sandtrail/sandtrail/record/event"
)

// Bounds on a Release file.
const (
	// maxRelease bounds an InRelease, Release or Release.gpg (bookworm's
	// InRelease is about 150 KB).
	maxRelease = 16 << 20
	// maxReleaseFiles bounds the files a Release lists.
	maxReleaseFiles = 200_000
	// maxSignatures bounds the signatures of one Release.
	maxSignatures = 16
)

// sum is a file's size and sha256 as a Release (or a Packages file) lists
// it.
type sum struct {
	size   int64
	sha256 [32]byte
}

// hex is the sum's digest in hex.
func (s sum) hex() string { return hex.EncodeToString(s.sha256[:]) }

// releaseInfo is what the mirror reads of a Release file.
type releaseInfo struct {
	suite, codename string
	// validUntil is zero when the Release has no Valid-Until.
	validUntil time.Time
	// files maps a path beneath dists/<suite>/ to its sum.
	files map[string]sum
	// byHash maps a sha256 to the paths with that content.
	byHash map[[32]byte][]string
}

// parseRelease reads the fields of a Release file's text (the signed text
// of an InRelease): Suite, Codename, Valid-Until and the SHA256 list. A
// Release with no SHA256 list, a malformed entry or a date that does not
// parse is an error wrapping ErrSyntax.
func parseRelease(text []byte) (*releaseInfo, error) {
	if len(text) > maxRelease || !isText(text) {
		return nil, fmt.Errorf("%w: the Release is not text of at most %d bytes", ErrSyntax, maxRelease)
	}
	keep := func(n string) bool { return n == "suite" || n == "codename" || n == "valid-until" || n == "sha256" }
	fields, _, err := newScanner(bytes.NewReader(text), 64<<10, maxRelease, keep).next()
	if err == io.EOF {
		return nil, fmt.Errorf("%w: the Release is empty", ErrSyntax)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the Release: %w", err)
	}
	ri := &releaseInfo{files: map[string]sum{}, byHash: map[[32]byte][]string{}}
	ri.suite, _ = get(fields, "suite")
	ri.codename, _ = get(fields, "codename")
	if v, ok := get(fields, "valid-until"); ok {
		if ri.validUntil, err = parseDate(v); err != nil {
			return nil, fmt.Errorf("%w: Valid-Until: %v", ErrSyntax, err)
		}
	}
	list, ok := get(fields, "sha256")
	if !ok {
		return nil, fmt.Errorf("%w: the Release lists no SHA256 sums", ErrSyntax)
	}
	if err := ri.addSums(list); err != nil {
		return nil, err
	}
	return ri, nil
}

// addSums reads the SHA256 field's lines, "<hex> <size> <path>".
func (ri *releaseInfo) addSums(list string) error {
	for i, line := range strings.Split(list, "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return fmt.Errorf("%w: SHA256 entry %d: want \"<sha256> <size> <path>\", got %q", ErrSyntax, i, event.Clip(line, 80))
		}
		s, err := parseSum(f[0], f[1])
		if err != nil {
			return fmt.Errorf("%w: SHA256 entry %d: %v", ErrSyntax, i, err)
		}
		if _, err := splitPath(f[2]); err != nil {
			return fmt.Errorf("%w: SHA256 entry %d: path %q: %v", ErrSyntax, i, event.Clip(f[2], 80), err)
		}
		if _, dup := ri.files[f[2]]; dup {
			return fmt.Errorf("%w: SHA256 entry %d: %s is listed twice", ErrSyntax, i, event.Clip(f[2], 80))
		}
		if len(ri.files) >= maxReleaseFiles {
			return fmt.Errorf("%w: the Release lists more than %d files", ErrSyntax, maxReleaseFiles)
		}
		ri.files[f[2]] = s
		ri.byHash[s.sha256] = append(ri.byHash[s.sha256], f[2])
	}
	return nil
}

// parseSum reads a hex sha256 and a decimal size.
func parseSum(hexSum, size string) (sum, error) {
	var s sum
	b, err := hex.DecodeString(hexSum)
	if err != nil || len(b) != len(s.sha256) {
		return s, fmt.Errorf("%q is not a sha256", event.Clip(hexSum, 80))
	}
	copy(s.sha256[:], b)
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil || n < 0 || n > 1<<40 || (len(size) > 1 && size[0] == '0') {
		return s, fmt.Errorf("%q is not a size", event.Clip(size, 80))
	}
	s.size = n
	return s, nil
}

// dateLayouts are the forms of a Release's dates: RFC 2822, as Debian's
// dak writes them ("Sat, 10 Aug 2024 09:24:08 UTC").
var dateLayouts = []string{time.RFC1123, time.RFC1123Z, "Mon, 2 Jan 2006 15:04:05 MST", "Mon, 2 Jan 2006 15:04:05 -0700"}

func parseDate(s string) (time.Time, error) {
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 2822 date", event.Clip(s, 80))
}

// openInRelease checks an InRelease's clearsigned signature against keys
// and returns the signed text. Anything but whitespace around the one
// signed message is refused, as apt refuses it: the text read must be
// exactly the text signed. The error wraps ErrSignature.
func openInRelease(keys openpgp.KeyRing, data []byte, now time.Time) ([]byte, error) {
	if len(data) > maxRelease {
		return nil, fmt.Errorf("%w: the InRelease is larger than %d bytes", ErrSignature, maxRelease)
	}
	i := bytes.Index(data, []byte("-----BEGIN PGP SIGNED MESSAGE-----"))
	if i < 0 || len(bytes.TrimSpace(data[:i])) != 0 {
		return nil, fmt.Errorf("%w: the InRelease does not begin with a clearsigned message", ErrSignature)
	}
	b, rest := clearsign.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("%w: the InRelease is not a valid clearsigned message", ErrSignature)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: the InRelease has data after its signature", ErrSignature)
	}
	if err := checkSignatures(keys, b.Bytes, b.ArmoredSignature.Body, now); err != nil {
		return nil, err
	}
	return b.Plaintext, nil
}

// checkDetached checks Release.gpg (armored) over a Release.
func checkDetached(keys openpgp.KeyRing, release, sig []byte, now time.Time) error {
	if len(release) > maxRelease || len(sig) > maxRelease {
		return fmt.Errorf("%w: the Release or its signature is larger than %d bytes", ErrSignature, maxRelease)
	}
	blk, err := armor.Decode(bytes.NewReader(sig))
	if err != nil || blk.Type != openpgp.SignatureType {
		return fmt.Errorf("%w: Release.gpg is not an armored signature", ErrSignature)
	}
	return checkSignatures(keys, release, blk.Body, now)
}

// checkSignatures accepts signed when one of the signature packets in sigs
// was made by a key of keys that was valid (not expired, not revoked) at
// now, as gpgv does: an archive signs with several keys, and the keyring
// may know only some of them. The error wraps ErrSignature.
func checkSignatures(keys openpgp.KeyRing, signed []byte, sigs io.Reader, now time.Time) error {
	raw, err := io.ReadAll(io.LimitReader(sigs, maxRelease))
	if err != nil {
		return fmt.Errorf("%w: reading the signature: %v", ErrSignature, err)
	}
	issuers, err := signatureIssuers(raw)
	if err != nil {
		return err
	}
	cfg := &packet.Config{Time: func() time.Time { return now }}
	var last error
	for _, id := range issuers {
		if len(keys.KeysByIdUsage(id, packet.KeyFlagSign)) == 0 {
			last = fmt.Errorf("no key in the keyring has id %016X", id)
			continue
		}
		_, _, err := openpgp.VerifyDetachedSignature(only{keys, id}, bytes.NewReader(signed), bytes.NewReader(raw), cfg)
		if err == nil {
			return nil
		}
		last = fmt.Errorf("key %016X: %v", id, err)
	}
	return fmt.Errorf("%w: no good signature by a key of the keyring: %v", ErrSignature, last)
}

// signatureIssuers reads the signature packets of raw and returns their
// issuers' key ids.
func signatureIssuers(raw []byte) ([]uint64, error) {
	var issuers []uint64
	pr := packet.NewReader(bytes.NewReader(raw))
	for len(issuers) <= maxSignatures {
		p, err := pr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: reading the signature: %v", ErrSignature, err)
		}
		s, ok := p.(*packet.Signature)
		if !ok || s.IssuerKeyId == nil {
			return nil, fmt.Errorf("%w: the signature holds a packet that is not an issued signature", ErrSignature)
		}
		issuers = append(issuers, *s.IssuerKeyId)
	}
	if len(issuers) == 0 || len(issuers) > maxSignatures {
		return nil, fmt.Errorf("%w: want 1 to %d signatures, got %d", ErrSignature, maxSignatures, len(issuers))
	}
	return issuers, nil
}

// only is a keyring that knows only the key with one id, so that the
// library checks the signature that key made and not the first one whose
// key the whole keyring knows.
type only struct {
	openpgp.KeyRing
	id uint64
}

func (o only) KeysById(id uint64) []openpgp.Key {
	if id != o.id {
		return nil
	}
	return o.KeyRing.KeysById(id)
}

func (o only) KeysByIdUsage(id uint64, usage byte) []openpgp.Key {
	if id != o.id {
		return nil
	}
	return o.KeyRing.KeysByIdUsage(id, usage)
}
