package deb

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
)

// archive is one upstream archive.
type archive struct {
	name string
	// base is the archive's URL, ending in "/", its host in lower case.
	base    *url.URL
	keyring string
	keys    openpgp.EntityList
	// keyErr: the default keyring could not be read; every Release of the
	// archive is refused, saying why.
	keyErr error
}

// maxKeyring bounds a keyring file.
const maxKeyring = 16 << 20

// newArchive reads one upstream: key is its name ("" for "debian"), val
// "[signed-by=KEYRING] URL".
func newArchive(key, val string, env *fetch.Env) (*archive, error) {
	name := key
	if name == "" {
		name = defaultName
	}
	if !validName(name) {
		return nil, fmt.Errorf("deb: upstream name %q: want lower-case letters, digits, '.' and '-'", event.Clip(name, 80))
	}
	keyring, raw := DefaultKeyring, strings.TrimSpace(val)
	explicit := false
	if opt, rest, ok := strings.Cut(raw, "]"); ok && strings.HasPrefix(opt, "[") {
		path, ok := strings.CutPrefix(strings.TrimSpace(opt[1:]), "signed-by=")
		if !ok || path == "" {
			return nil, fmt.Errorf("deb: upstream %s: the only option is [signed-by=KEYRING], got %q", name, event.Clip(opt+"]", 80))
		}
		keyring, raw, explicit = path, strings.TrimSpace(rest), true
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("deb: upstream %s: %q is not an http(s) URL", name, event.Clip(raw, 80))
	}
	u.Host = strings.ToLower(u.Host)
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		u.RawPath = ""
	}
	a := &archive{name: name, base: u, keyring: keyring}
	a.keys, err = readKeyring(keyring)
	if err != nil {
		if explicit || !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("deb: upstream %s: %w", name, err)
		}
		a.keyErr = err
		env.Log.Warn("the debian archive keyring is missing: every Release will be refused", "archive", name, "keyring", keyring)
	}
	return a, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// readKeyring reads an OpenPGP keyring file, binary (.gpg) or armored
// (.asc).
func readKeyring(path string) (openpgp.EntityList, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading keyring: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyring+1))
	if err != nil {
		return nil, fmt.Errorf("reading keyring %s: %w", path, err)
	}
	if len(b) > maxKeyring {
		return nil, fmt.Errorf("keyring %s is larger than %d bytes", path, maxKeyring)
	}
	var el openpgp.EntityList
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("-----BEGIN")) {
		el, err = openpgp.ReadArmoredKeyRing(bytes.NewReader(b))
	} else {
		el, err = openpgp.ReadKeyRing(bytes.NewReader(b))
	}
	if err != nil {
		return nil, fmt.Errorf("reading keyring %s: %w", path, err)
	}
	if len(el) == 0 {
		return nil, fmt.Errorf("keyring %s holds no key", path)
	}
	return el, nil
}

// fileURL is the upstream URL of an archive path.
func (a *archive) fileURL(p string) string { return a.base.String() + escapePath(p) }
