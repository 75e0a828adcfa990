package journal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// GenerateKey returns a new Ed25519 checkpoint key pair named name, in the
// golang.org/x/mod/sumdb/note encodings: skey ("PRIVATE+KEY+name+hash+…")
// signs and must stay secret; vkey ("name+hash+…") verifies.
func GenerateKey(name string) (skey, vkey string, err error) {
	skey, vkey, err = note.GenerateKey(rand.Reader, name)
	if err != nil {
		return "", "", fmt.Errorf("generating checkpoint key: %w", err)
	}
	return skey, vkey, nil
}

// VerifierKey derives the verifier key of the signer key skey.
func VerifierKey(skey string) (string, error) {
	if _, err := note.NewSigner(skey); err != nil {
		return "", fmt.Errorf("%w: parsing signer key: %v", ErrBadKey, err)
	}
	parts := strings.SplitN(skey, "+", 5)
	key, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(key) != 1+ed25519.SeedSize {
		return "", fmt.Errorf("%w: signer key is not an Ed25519 seed", ErrBadKey)
	}
	pub := ed25519.NewKeyFromSeed(key[1:]).Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(parts[2], pub)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	return vkey, nil
}

// LoadSigner reads a signer key file. The file must not be readable or
// writable by group or others (mode 0600 or stricter): a key that others
// could read could sign forged checkpoints, so a looser mode is an error
// wrapping ErrBadKey.
func LoadSigner(path string) (note.Signer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading signer key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v, want 0600", ErrBadKey, path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading signer key: %w", err)
	}
	s, err := note.NewSigner(string(bytes.TrimSpace(b)))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadKey, path, err)
	}
	return s, nil
}

// LoadVerifier reads a verifier key file (one "name+hash+base64" line).
func LoadVerifier(path string) (note.Verifier, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading verifier key: %w", err)
	}
	v, err := note.NewVerifier(string(bytes.TrimSpace(b)))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadKey, path, err)
	}
	return v, nil
}
