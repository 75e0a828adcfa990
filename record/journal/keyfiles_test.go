package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keyName is the name of the test's key pairs.
const keyName = "sandtrail/test"

// TestKeyPairFiles: WriteKeyPair writes the signer key 0600 and the
// verifier key 0644, refuses to overwrite either, and ReadVerifierKey and
// LoadVerifiers read back the same verifier key; a verifier key file that
// does not match its signer key is an error.
func TestKeyPairFiles(t *testing.T) {
	skey, vkey := KeyPairIn(filepath.Join(t.TempDir(), "keys"))
	if vkey != VerifierPath(skey) {
		t.Fatalf("KeyPairIn = %s, %s; want the verifier beside the signer (%s)", skey, vkey, VerifierPath(skey))
	}
	pub, err := WriteKeyPair(skey, vkey, keyName)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{skey, 0o600}, {vkey, 0o644}} {
		if st, err := os.Stat(f.path); err != nil || st.Mode().Perm() != f.mode {
			t.Errorf("%s: %v, %v; want mode %v", f.path, st.Mode().Perm(), err, f.mode)
		}
	}
	if _, err := WriteKeyPair(skey, vkey, keyName); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Errorf("WriteKeyPair over an existing pair = %v, want a refusal", err)
	}
	if got, err := ReadVerifierKey(skey, vkey); err != nil || got != pub {
		t.Errorf("ReadVerifierKey = %q, %v; want %q", got, err, pub)
	}
	if vs, err := LoadVerifiers(vkey); err != nil {
		t.Errorf("LoadVerifiers = %v", err)
	} else if _, err := vs.Verifier(keyName, 0); err == nil {
		t.Errorf("Verifier with a wrong hash found a key")
	}
	_, other, err := GenerateKey(keyName)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vkey, []byte(other+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadVerifierKey(skey, vkey); err == nil || !strings.Contains(err.Error(), "does not match the signer key") {
		t.Errorf("ReadVerifierKey with a foreign .pub = %v, want a mismatch", err)
	}
	if err := os.Remove(skey); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadVerifierKey(skey, vkey); err != nil || got != other {
		t.Errorf("ReadVerifierKey without the signer = %q, %v; want the .pub %q", got, err, other)
	}
}
