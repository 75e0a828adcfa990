// Package debtest is a fixture Debian archive for tests: it builds, in
// Go, a tiny archive of the packages a test defines (real .debs: ar
// archives of debian-binary, control.tar.gz and data.tar.gz), its
// Packages and Packages.gz, and a Release that it signs, clearsigned
// (InRelease) and detached (Release.gpg), with an OpenPGP key generated
// for the test, and serves it on loopback as Debian's archive is laid
// out, by-hash paths included. It counts requests, and can be told to
// serve a file's bytes corrupted or a Release whose signature no longer
// matches its text.
package debtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// Package is a fixture binary package.
type Package struct {
	Name, Version string
	// Arch is its architecture (default amd64).
	Arch string
}

// Options shape the archive.
type Options struct {
	// Suite and Codename (default stable and bookworm); the archive is
	// served at dists/<Suite>/.
	Suite, Codename string
	// ValidUntil is the Release's Valid-Until; zero: none.
	ValidUntil time.Time
	// NoInRelease serves only Release and Release.gpg.
	NoInRelease bool
}

// Archive is a running fixture archive.
type Archive struct {
	*httptest.Server
	// URL is the archive's base URL, ending in "/debian/".
	URL string
	// Keyring is the path of the public keyring that signs it (binary).
	Keyring string
	// Suite is the suite it serves.
	Suite string
	// Debs maps each package name to its pool path.
	Debs map[string]string

	mu      sync.Mutex
	files   map[string][]byte // archive path → bytes
	corrupt map[string]bool   // archive path → serve other bytes
	counts  map[string]int
}

// Start builds and serves an archive of pkgs, closed when the test ends.
func Start(t testing.TB, opts Options, pkgs ...Package) *Archive {
	t.Helper()
	if opts.Suite == "" {
		opts.Suite, opts.Codename = "stable", "bookworm"
	}
	key, err := testKey()
	if err != nil {
		t.Fatal(err)
	}
	a := &Archive{Suite: opts.Suite, Debs: map[string]string{}, files: map[string][]byte{}, corrupt: map[string]bool{}, counts: map[string]int{}}
	a.Keyring = filepath.Join(t.TempDir(), "fixture-archive.gpg")
	var pub bytes.Buffer
	if err := key.Serialize(&pub); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.Keyring, pub.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.build(key, opts, pkgs); err != nil {
		t.Fatal(err)
	}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	a.URL = a.Server.URL + "/debian/"
	return a
}

// The test key is generated once per test binary: RSA key generation
// takes about a second.
var (
	keyOnce sync.Once
	key     *openpgp.Entity
	keyErr  error
)

func testKey() (*openpgp.Entity, error) {
	keyOnce.Do(func() {
		key, keyErr = openpgp.NewEntity("sandtrail fixture archive", "test only", "archive@sandtrail.invalid",
			&packet.Config{Algorithm: packet.PubKeyAlgoRSA, RSABits: 2048, DefaultHash: crypto.SHA256})
	})
	return key, keyErr
}

// build writes the pool, the Packages files and the signed Release.
func (a *Archive) build(key *openpgp.Entity, opts Options, pkgs []Package) error {
	var idx bytes.Buffer
	for _, p := range pkgs {
		if p.Arch == "" {
			p.Arch = "amd64"
		}
		deb, err := Deb(p)
		if err != nil {
			return err
		}
		path := fmt.Sprintf("pool/main/%s/%s/%s_%s_%s.deb", p.Name[:1], p.Name, p.Name, p.Version, p.Arch)
		a.files[path], a.Debs[p.Name] = deb, path
		s := sha256.Sum256(deb)
		fmt.Fprintf(&idx, "Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: Sandtrail Tests <tests@sandtrail.invalid>\n"+
			"Installed-Size: 1\nFilename: %s\nSize: %d\nSHA256: %s\nSection: misc\nPriority: optional\n"+
			"Description: fixture package %s\n a package the test built.\n .\n Nothing more.\n\n",
			p.Name, p.Version, p.Arch, path, len(deb), hex.EncodeToString(s[:]), p.Name)
	}
	dir := "dists/" + opts.Suite + "/"
	a.files[dir+"main/binary-amd64/Packages"] = idx.Bytes()
	a.files[dir+"main/binary-amd64/Packages.gz"] = gz(idx.Bytes())
	release := a.release(opts)
	a.files[dir+"Release"] = release
	var in, det bytes.Buffer
	cfg := &packet.Config{DefaultHash: crypto.SHA256}
	w, err := clearsign.Encode(&in, key.PrivateKey, cfg)
	if err != nil {
		return err
	}
	w.Write(release)
	if err := w.Close(); err != nil {
		return err
	}
	if err := openpgp.ArmoredDetachSign(&det, key, bytes.NewReader(release), cfg); err != nil {
		return err
	}
	if !opts.NoInRelease {
		a.files[dir+"InRelease"] = in.Bytes()
	}
	a.files[dir+"Release.gpg"] = det.Bytes()
	return nil
}

// release is the Release text, listing every file under dists/<suite>/.
func (a *Archive) release(opts Options) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "Origin: Sandtrail\nLabel: Sandtrail fixture\nSuite: %s\nCodename: %s\nDate: %s\n",
		opts.Suite, opts.Codename, time.Now().UTC().Format(time.RFC1123))
	if !opts.ValidUntil.IsZero() {
		fmt.Fprintf(&b, "Valid-Until: %s\n", opts.ValidUntil.UTC().Format(time.RFC1123))
	}
	b.WriteString("Acquire-By-Hash: yes\nArchitectures: amd64\nComponents: main\nDescription: sandtrail fixture archive\nSHA256:\n")
	dir := "dists/" + opts.Suite + "/"
	var names []string
	for p := range a.files {
		if rest, ok := strings.CutPrefix(p, dir); ok {
			names = append(names, rest)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		s := sha256.Sum256(a.files[dir+n])
		fmt.Fprintf(&b, " %s %16d %s\n", hex.EncodeToString(s[:]), len(a.files[dir+n]), n)
	}
	return []byte(b.String())
}

// serve serves the archive beneath /debian/, by-hash paths included.
func (a *Archive) serve(w http.ResponseWriter, r *http.Request) {
	p, ok := strings.CutPrefix(r.URL.Path, "/debian/")
	a.mu.Lock()
	a.counts[p]++
	b, found := a.files[p]
	if !found {
		p, b, found = a.byHash(p)
	}
	if found && a.corrupt[p] {
		b = corrupted(b)
	}
	a.mu.Unlock()
	if !ok || !found {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(b)
}

// byHash finds the file of a ".../by-hash/SHA256/<hex>" path.
func (a *Archive) byHash(p string) (string, []byte, bool) {
	dir, hx, ok := strings.Cut(p, "/by-hash/SHA256/")
	if !ok {
		return "", nil, false
	}
	for name, b := range a.files {
		s := sha256.Sum256(b)
		if strings.HasPrefix(name, dir+"/") && !strings.Contains(name[len(dir)+1:], "/") && hex.EncodeToString(s[:]) == hx {
			return name, b, true
		}
	}
	return "", nil, false
}

// corrupted is b with one byte changed. For a signed Release it changes
// the signed text, so that the signature no longer verifies.
func corrupted(b []byte) []byte {
	c := bytes.Clone(b)
	if i := bytes.Index(c, []byte("Sandtrail fixture")); i >= 0 {
		c[i] = 's'
		return c
	}
	if len(c) == 0 {
		return []byte{0}
	}
	c[len(c)/2] ^= 0x55
	return c
}

// Corrupt makes the archive serve path (beneath the archive, by-hash
// aliases included) with one byte changed; for InRelease or Release, a
// byte of the signed text.
func (a *Archive) Corrupt(path string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.corrupt[path] = true
}

// Count is how many requests path (beneath the archive) had.
func (a *Archive) Count(path string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts[path]
}

// File returns the bytes the archive holds at path.
func (a *Archive) File(path string) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.files[path]
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

// Deb builds a real, minimal .deb of p: an ar archive of debian-binary,
// control.tar.gz and data.tar.gz.
func Deb(p Package) ([]byte, error) {
	if p.Arch == "" {
		p.Arch = "amd64"
	}
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: Sandtrail Tests <tests@sandtrail.invalid>\n"+
		"Description: fixture package %s\n a package the test built.\n", p.Name, p.Version, p.Arch, p.Name)
	ctl, err := targz(map[string]string{"./control": control})
	if err != nil {
		return nil, err
	}
	data, err := targz(map[string]string{"./usr/share/doc/" + p.Name + "/README": "fixture " + p.Name + " " + p.Version + "\n"})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteString("!<arch>\n")
	for _, m := range []struct {
		name string
		b    []byte
	}{{"debian-binary", []byte("2.0\n")}, {"control.tar.gz", ctl}, {"data.tar.gz", data}} {
		fmt.Fprintf(&out, "%-16s%-12d%-6d%-6d%-8o%-10d`\n", m.name, 1700000000, 0, 0, 0o100644, len(m.b))
		out.Write(m.b)
		if len(m.b)%2 == 1 {
			out.WriteByte('\n')
		}
	}
	return out.Bytes(), nil
}

// targz is a gzipped tar of files (path → content), with their parent
// directories.
func targz(files map[string]string) ([]byte, error) {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	dirs := map[string]bool{}
	for _, n := range names {
		for d := filepath.Dir(n); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var ds []string
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	mt := time.Unix(1700000000, 0)
	for _, d := range ds {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mt}); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n])), ModTime: mt}); err != nil {
			return nil, err
		}
		tw.Write([]byte(files[n]))
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
