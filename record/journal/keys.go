package journal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// VerifierPath is the verifier key file beside the signer key file
// keyFile: its name with .key replaced by .pub.
func VerifierPath(keyFile string) string { return strings.TrimSuffix(keyFile, ".key") + ".pub" }

// KeyPairIn returns the paths of the key pair kept in dir:
// checkpoint.key and checkpoint.pub.
func KeyPairIn(dir string) (skeyPath, vkeyPath string) {
	return filepath.Join(dir, "checkpoint.key"), filepath.Join(dir, "checkpoint.pub")
}

// WriteKeyPair generates a checkpoint key pair named name (GenerateKey),
// writes the signer key to skeyPath (mode 0600, its directory 0700) and the
// verifier key to vkeyPath (mode 0644), and returns the verifier key. It
// refuses to overwrite either file: replacing a signer key would orphan
// every checkpoint it signed.
func WriteKeyPair(skeyPath, vkeyPath, name string) (vkey string, err error) {
	for _, p := range []string{skeyPath, vkeyPath} {
		if _, err := os.Lstat(p); err == nil {
			return "", fmt.Errorf("%s already exists; refusing to overwrite it", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	skey, vkey, err := GenerateKey(name)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(skeyPath), 0o700); err != nil {
		return "", err
	}
	if err := writeNew(skeyPath, skey, 0o600); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(vkeyPath), 0o755); err != nil {
		return "", err
	}
	if err := writeNew(vkeyPath, vkey, 0o644); err != nil {
		return "", err
	}
	return vkey, nil
}

// writeNew creates path with exactly perm (whatever the umask), failing if
// it exists, and syncs it.
func writeNew(path, content string, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(content + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadVerifierKey returns the verifier key of the pair at skeyPath and
// vkeyPath. It derives it from the signer key when that file exists (which
// LoadSigner must accept), and then requires the verifier key file, if
// any, to match; otherwise it reads the verifier key file.
func ReadVerifierKey(skeyPath, vkeyPath string) (string, error) {
	pub, perr := os.ReadFile(vkeyPath)
	if _, err := os.Stat(skeyPath); err == nil {
		if _, err := LoadSigner(skeyPath); err != nil {
			return "", err
		}
		b, err := os.ReadFile(skeyPath)
		if err != nil {
			return "", err
		}
		vkey, err := VerifierKey(strings.TrimSpace(string(b)))
		if err != nil {
			return "", err
		}
		if perr == nil && strings.TrimSpace(string(pub)) != vkey {
			return "", fmt.Errorf("%s does not match the signer key %s (it holds %q)", vkeyPath, skeyPath, strings.TrimSpace(string(pub)))
		}
		return vkey, nil
	}
	if perr != nil {
		return "", fmt.Errorf("no key: %w (create one with sandtrail keys generate)", perr)
	}
	if _, err := LoadVerifier(vkeyPath); err != nil {
		return "", err
	}
	return strings.TrimSpace(string(pub)), nil
}

// LoadVerifiers reads verifier key files (LoadVerifier) into one list.
func LoadVerifiers(files ...string) (note.Verifiers, error) {
	var vs []note.Verifier
	for _, f := range files {
		v, err := LoadVerifier(f)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return note.VerifierList(vs...), nil
}
