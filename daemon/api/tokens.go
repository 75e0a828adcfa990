package api

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sandtrail/sandtrail/collector/session"
)

// ScopeAny is the scope of a token that may name every session and read
// the event stream, as root may on the unix socket.
const ScopeAny = "*"

// Tokens are the bearer tokens the TCP listener accepts, read from the
// tokens file (api.tokens_file): one per line, "sha256:HEX SCOPE [NAME]",
// HEX the sha256 of the token, SCOPE "*" or "session:ID". The file holds
// only hashes, so reading it does not give a token away.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	sum   [32]byte
	scope string
	name  string
}

// ParseTokens parses a tokens file's content; name is for errors.
func ParseTokens(name string, b []byte) (*Tokens, error) {
	t := &Tokens{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("%s:%d: want sha256:HEX SCOPE [NAME]", name, n)
		}
		h, ok := strings.CutPrefix(f[0], "sha256:")
		sum, err := hex.DecodeString(h)
		if !ok || err != nil || len(sum) != 32 {
			return nil, fmt.Errorf("%s:%d: %q is not sha256: and 64 hex digits (the file holds tokens' hashes, never tokens)", name, n, f[0][:min(len(f[0]), 16)]+"…")
		}
		scope := f[1]
		if scope != ScopeAny {
			id, ok := strings.CutPrefix(scope, "session:")
			if !ok || !session.ValidID(id) {
				return nil, fmt.Errorf("%s:%d: scope %q: want * or session:ID", name, n, scope)
			}
			scope = id
		}
		e := tokenEntry{scope: scope, name: strings.Join(f[2:], " ")}
		copy(e.sum[:], sum)
		t.entries = append(t.entries, e)
	}
	return t, sc.Err()
}

// TokenFile is the tokens file, read again whenever it changed, so that a
// token added or removed (sandtrail api token) counts without a restart.
type TokenFile struct {
	path string

	mu   sync.Mutex
	mod  time.Time
	size int64
	t    *Tokens
}

// NewTokenFile returns the tokens file at path; a missing file accepts no
// token.
func NewTokenFile(path string) *TokenFile { return &TokenFile{path: path} }

// Scope returns the scope of tok by the file as it is now. A file that
// cannot be read, or is writable by others, accepts no token (logged by
// the caller through err).
func (f *TokenFile) Scope(tok string) (string, bool, error) {
	if f == nil {
		return "", false, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		f.t = nil
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		// Checked every time: a chmod leaves the modification time alone.
		f.t = nil
		return "", false, fmt.Errorf("api tokens: %s is writable by others (mode %v): anyone could add a token", f.path, fi.Mode().Perm())
	}
	if f.t == nil || !fi.ModTime().Equal(f.mod) || fi.Size() != f.size {
		t, err := ReadTokens(f.path)
		if err != nil {
			f.t = nil
			return "", false, err
		}
		f.t, f.mod, f.size = t, fi.ModTime(), fi.Size()
	}
	scope, ok := f.t.Scope(tok)
	return scope, ok, nil
}

// ReadTokens reads the tokens file at path, which must not be writable by
// others.
func ReadTokens(path string) (*Tokens, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("api tokens: %w", err)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("api tokens: %s is writable by others (mode %v): anyone could add a token", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("api tokens: %w", err)
	}
	return ParseTokens(path, b)
}

// Scope returns the scope of tok: ScopeAny or a session id.
func (t *Tokens) Scope(tok string) (string, bool) {
	if t == nil {
		return "", false
	}
	sum := sha256.Sum256([]byte(tok))
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
			return e.scope, true
		}
	}
	return "", false
}

// NewToken makes a random token and the line of the tokens file that
// accepts it with scope (ScopeAny or a session id) and name.
func NewToken(scope, name string) (token, line string, err error) {
	if scope != ScopeAny && !session.ValidID(scope) {
		return "", "", fmt.Errorf("scope %q: want * or a session id", scope)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	token = "stk_" + base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(token))
	s := scope
	if s != ScopeAny {
		s = "session:" + s
	}
	line = "sha256:" + hex.EncodeToString(sum[:]) + " " + s
	if name = strings.Join(strings.Fields(name), "-"); name != "" {
		line += " " + name
	}
	return token, line, nil
}
