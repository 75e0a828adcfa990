// Package verify checks artifacts as they stream: a Reader hashes what it
// reads with every algorithm a publisher's digests name (and always with
// sha256, the cache's key), refuses to read past the expected size, and at
// the end returns ErrMismatch unless every digest matches. It has no "off"
// switch: a caller that has no digest to check has nothing to verify, and
// says so in its record.
//
// Digests are parsed from the forms the ecosystems write them: npm's
// Subresource Integrity strings ("sha512-<base64>"), hex digests (PyPI,
// crates.io, Debian, npm's shasum) and OCI digests ("sha256:<hex>").
package verify

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
)

// Errors a Reader returns.
var (
	// ErrMismatch: the bytes do not hash to an expected digest.
	ErrMismatch = errors.New("verify: digest mismatch")
	// ErrTooLarge: there are more bytes than the limit.
	ErrTooLarge = errors.New("verify: artifact larger than expected")
	// ErrSize: there are fewer or more bytes than the expected size.
	ErrSize = errors.New("verify: artifact size differs from the expected size")
)

// The algorithms a Digest may name.
const (
	SHA1   = "sha1"
	SHA256 = "sha256"
	SHA512 = "sha512"
)

// Digest is an expected (or computed) digest.
type Digest struct {
	Alg string // SHA1, SHA256 or SHA512
	Sum []byte
}

// newHash returns a hash for alg.
func newHash(alg string) (hash.Hash, error) {
	switch alg {
	case SHA1:
		return sha1.New(), nil
	case SHA256:
		return sha256.New(), nil
	case SHA512:
		return sha512.New(), nil
	}
	return nil, fmt.Errorf("verify: unsupported digest algorithm %q", alg)
}

// size is the length of a digest of alg, or 0 for an unknown one.
func size(alg string) int {
	switch alg {
	case SHA1:
		return sha1.Size
	case SHA256:
		return sha256.Size
	case SHA512:
		return sha512.Size
	}
	return 0
}

// Hex parses a hex digest of alg.
func Hex(alg, s string) (Digest, error) {
	b, err := hex.DecodeString(s)
	if err != nil || size(alg) == 0 || len(b) != size(alg) {
		return Digest{}, fmt.Errorf("verify: %q is not a %s hex digest", event.Clip(s, 80), alg)
	}
	return Digest{Alg: alg, Sum: b}, nil
}

// OCI parses an OCI digest, "sha256:<hex>" or "sha512:<hex>".
func OCI(s string) (Digest, error) {
	alg, h, ok := strings.Cut(s, ":")
	if !ok || (alg != SHA256 && alg != SHA512) {
		return Digest{}, fmt.Errorf("verify: %q is not an OCI digest", event.Clip(s, 80))
	}
	return Hex(alg, h)
}

// SRI parses a Subresource Integrity value: space-separated
// "<alg>-<base64>" entries, options after "?" ignored. Entries of unknown
// algorithms are skipped; none known is an error.
func SRI(s string) ([]Digest, error) {
	var out []Digest
	for _, f := range strings.Fields(s) {
		alg, b64, ok := strings.Cut(f, "-")
		if !ok || size(alg) == 0 {
			continue
		}
		b64, _, _ = strings.Cut(b64, "?")
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(b) != size(alg) {
			return nil, fmt.Errorf("verify: bad %s integrity value %q", alg, event.Clip(f, 80))
		}
		out = append(out, Digest{Alg: alg, Sum: b})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("verify: no usable digest in integrity %q", event.Clip(s, 80))
	}
	return out, nil
}

// String writes d as its ecosystem's record does: "sha512-<base64>" for
// sha512 (npm's integrity) and "sha256:<hex>" otherwise.
func (d Digest) String() string {
	if d.Alg == SHA512 {
		return "sha512-" + base64.StdEncoding.EncodeToString(d.Sum)
	}
	return d.Alg + ":" + hex.EncodeToString(d.Sum)
}

// Reader reads from an underlying reader and verifies what it read.
type Reader struct {
	r      io.Reader
	want   []Digest
	hashes map[string]hash.Hash
	n      int64
	max    int64 // refuse more than this
	exact  bool  // max is the exact size
	err    error // sticky
}

// NewReader verifies r against want. With exact set, r must hold exactly
// max bytes; otherwise at most max (max <= 0: no limit, for callers that
// have a digest but no size). Reading returns ErrMismatch, ErrTooLarge or
// ErrSize instead of the final io.EOF when the bytes fail; a caller must
// read to io.EOF and treat any other end as a failure.
func NewReader(r io.Reader, max int64, exact bool, want ...Digest) (*Reader, error) {
	v := &Reader{r: r, want: want, hashes: map[string]hash.Hash{SHA256: sha256.New()}, max: max, exact: exact && max > 0}
	for _, d := range want {
		if _, ok := v.hashes[d.Alg]; ok {
			continue
		}
		h, err := newHash(d.Alg)
		if err != nil {
			return nil, err
		}
		v.hashes[d.Alg] = h
	}
	return v, nil
}

func (v *Reader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.max > 0 && int64(len(p)) > v.max-v.n+1 {
		p = p[:v.max-v.n+1] // one byte more than allowed shows an overrun
	}
	n, err := v.r.Read(p)
	v.n += int64(n)
	if v.max > 0 && v.n > v.max {
		v.err = ErrTooLarge
		return 0, v.err
	}
	for _, h := range v.hashes {
		h.Write(p[:n])
	}
	if err == io.EOF {
		err = v.finish()
	}
	if err != nil {
		v.err = err
	}
	return n, err
}

// finish checks the size and every digest at the end of the bytes.
func (v *Reader) finish() error {
	if v.exact && v.n != v.max {
		return fmt.Errorf("%w: %d bytes, want %d", ErrSize, v.n, v.max)
	}
	for _, d := range v.want {
		if got := v.hashes[d.Alg].Sum(nil); !bytes.Equal(got, d.Sum) {
			return fmt.Errorf("%w: %s is %s, want %s", ErrMismatch, d.Alg, Digest{d.Alg, got}, d)
		}
	}
	return io.EOF
}

// Size is how many bytes were read.
func (v *Reader) Size() int64 { return v.n }

// Sum returns the digest of alg of what was read so far (sha256 always;
// the other algorithms of the expected digests).
func (v *Reader) Sum(alg string) (Digest, bool) {
	h, ok := v.hashes[alg]
	if !ok {
		return Digest{}, false
	}
	return Digest{Alg: alg, Sum: h.Sum(nil)}, true
}
