// Package cratestest is a fixture crates.io sparse index for tests: it
// serves config.json, the index files (one JSON line per version, with
// cksum and pubtime, at the paths cargo asks for) and real .crate files
// that it generates (a gzipped tar of <name>-<version>/Cargo.toml and
// src/lib.rs, which cargo checks and unpacks), on loopback. It counts the
// requests for each path, can be told to tamper with a crate or to add a
// raw line to an index file, and can be cut off (Down).
package cratestest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Dep is a dependency of a version, on another crate of the fixture.
type Dep struct {
	Name string
	Req  string
}

// Version is one version of a fixture crate.
type Version struct {
	Version string
	// Published is its pubtime (default: 30 days ago); NoPubtime leaves it
	// out, as older index lines do.
	Published time.Time
	NoPubtime bool
	Deps      []Dep
	Yanked    bool
	// Files are more files of the crate, by path beneath its directory
	// ("build.rs"); with a build.rs, Cargo.toml names it as the build
	// script.
	Files map[string]string
}

// Crate is a fixture crate.
type Crate struct {
	Name     string
	Versions []Version
}

// DefaultDL is the download template the fixture's config.json names
// beneath its URL: it uses markers, as private registries do.
const DefaultDL = "/files/{lowerprefix}/{crate}/{crate}-{version}.crate"

// Registry is a running fixture sparse index.
type Registry struct {
	*httptest.Server

	mu     sync.Mutex
	dl     string // the download template, beneath the URL unless absolute
	crates map[string]*Crate
	files  map[string][]byte // .crate by name@version
	extra  map[string][]string
	tamper map[string]bool
	down   bool
	counts map[string]int
}

// Start starts an index with crates on loopback, closed when the test
// ends.
func Start(t testing.TB, crates ...Crate) *Registry {
	t.Helper()
	r := &Registry{dl: DefaultDL, crates: map[string]*Crate{}, files: map[string][]byte{}, extra: map[string][]string{},
		tamper: map[string]bool{}, counts: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	for _, c := range crates {
		r.Add(c)
	}
	return r
}

// Add adds (or replaces) a crate.
func (r *Registry) Add(c Crate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cp := c
	r.crates[strings.ToLower(c.Name)] = &cp
	for _, v := range c.Versions {
		r.files[c.Name+"@"+v.Version] = CrateFile(c.Name, v)
	}
}

// SetDL sets the download template of config.json: with markers or a
// base URL without them (crates.io's form), beneath the fixture's URL
// when it begins with a /.
func (r *Registry) SetDL(template string) {
	r.mu.Lock()
	r.dl = template
	r.mu.Unlock()
}

// Tamper makes the .crate of name@version be served with other bytes than
// its cksum names.
func (r *Registry) Tamper(name, version string) {
	r.mu.Lock()
	r.tamper[name+"@"+version] = true
	r.mu.Unlock()
}

// AddLine appends a raw line to the index file of name.
func (r *Registry) AddLine(name, raw string) {
	r.mu.Lock()
	r.extra[strings.ToLower(name)] = append(r.extra[strings.ToLower(name)], raw)
	r.mu.Unlock()
}

// Down makes every request fail with a 503 (down) or be served again.
func (r *Registry) Down(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

// Count returns how many requests path ("/config.json", IndexPath's or
// CratePath's) received.
func (r *Registry) Count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[path]
}

// Total returns how many requests the index received.
func (r *Registry) Total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.counts {
		n += c
	}
	return n
}

// IndexPath is the path of a crate's index file.
func IndexPath(name string) string {
	n := strings.ToLower(name)
	switch len(n) {
	case 1, 2:
		return fmt.Sprintf("/%d/%s", len(n), n)
	case 3:
		return "/3/" + n[:1] + "/" + n
	}
	return "/" + n[:2] + "/" + n[2:4] + "/" + n
}

// CratePath is the path of a version's .crate under DefaultDL.
func CratePath(name, version string) string {
	pre := strings.TrimSuffix(strings.TrimPrefix(IndexPath(name), "/"), "/"+strings.ToLower(name))
	return "/files/" + pre + "/" + name + "/" + name + "-" + version + ".crate"
}

// Cksum is the hex sha256 of b, as an index line writes it.
func Cksum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Cargo finds the real cargo (on PATH, or rustup's ~/.cargo/bin), or skips
// the test: the tests against the fixture index use the real client.
func Cargo(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("cargo"); err == nil {
		return p
	}
	home, _ := os.UserHomeDir()
	if p := filepath.Join(home, ".cargo", "bin", "cargo"); exec.Command(p, "--version").Run() == nil {
		return p
	}
	t.Skip("cargo is not installed (neither on PATH nor in ~/.cargo/bin): this test needs the real client")
	return ""
}
