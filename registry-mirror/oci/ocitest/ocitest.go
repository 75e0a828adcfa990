// Package ocitest is a fixture OCI registry for tests:
// go-containerregistry's in-memory registry (pkg/registry) served on
// loopback, with images the test pushes. It counts the GET requests for
// each path, can be told to serve other bytes (or another Docker-Content-Digest)
// for a path, to redirect a path elsewhere, and to demand anonymous bearer
// tokens as Docker Hub does.
package ocitest

import (
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is a running fixture registry.
type Registry struct {
	*httptest.Server
	// Host is its host:port, for image references.
	Host string
	reg  http.Handler

	mu      sync.Mutex
	counts  map[string]int
	tamper  map[string]func([]byte) []byte
	digests map[string]string
	moved   map[string]string
	token   string
}

// Start starts a registry on loopback, closed when the test ends.
func Start(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{reg: registry.New(registry.Logger(nopLogger())), counts: map[string]int{},
		tamper: map[string]func([]byte) []byte{}, digests: map[string]string{}, moved: map[string]string{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	r.Host = strings.TrimPrefix(r.URL, "http://")
	t.Cleanup(r.Close)
	return r
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if req.Method == http.MethodGet {
		r.counts[req.URL.Path]++
	}
	tamper, digest, token, moved := r.tamper[req.URL.Path], r.digests[req.URL.Path], r.token, r.moved[req.URL.Path]
	r.mu.Unlock()
	if moved != "" {
		http.Redirect(w, req, moved, http.StatusTemporaryRedirect)
		return
	}
	if req.URL.Path == "/token" {
		fmt.Fprintf(w, "{\"token\":%q}", token)
		return
	}
	if token != "" && req.Header.Get("Authorization") != "Bearer "+token {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s/token",service="fixture",scope="repository:x:pull"`, r.URL))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if tamper == nil && digest == "" {
		r.reg.ServeHTTP(w, req)
		return
	}
	rec := httptest.NewRecorder()
	r.reg.ServeHTTP(rec, req)
	maps.Copy(w.Header(), rec.Header())
	body := rec.Body.Bytes()
	if tamper != nil {
		body = tamper(body)
	}
	if digest != "" {
		w.Header().Set("Docker-Content-Digest", digest)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.Code)
	w.Write(body)
}

// Count is how many GET requests the registry had for path (a push's
// requests are not GETs).
func (r *Registry) Count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[path]
}

// Tamper makes the registry serve f(the real bytes) for path.
func (r *Registry) Tamper(path string, f func([]byte) []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tamper[path] = f
}

// SendDigest makes the registry send Docker-Content-Digest: d for path
// ("": none at all, which real registries need not send either).
func (r *Registry) SendDigest(path, d string) {
	r.Tamper(path, func(b []byte) []byte { return b })
	r.mu.Lock()
	defer r.mu.Unlock()
	r.digests[path] = d
}

// Redirect makes the registry answer requests for path with a 307 to
// the URL to, as registries do for blobs kept on a CDN.
func (r *Registry) Redirect(path, to string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.moved[path] = to
}

// RequireToken makes the registry answer 401 with a Bearer challenge
// unless a request carries tok, which its /token endpoint hands out.
func (r *Registry) RequireToken(tok string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.token = tok
}

// Image is a random image of n layers of size bytes each.
func Image(t testing.TB, size, n int64) v1.Image {
	t.Helper()
	img, err := random.Image(size, n)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// Index is a random index of count images, each of n layers of size bytes.
func Index(t testing.TB, size, n, count int64) v1.ImageIndex {
	t.Helper()
	idx, err := random.Index(size, n, count)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// Push pushes img as repo:tag ("library/alpine:3.19").
func (r *Registry) Push(t testing.TB, ref string, img v1.Image) {
	t.Helper()
	if err := remote.Write(r.ref(t, ref), img); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
}

// PushIndex pushes idx as repo:tag.
func (r *Registry) PushIndex(t testing.TB, ref string, idx v1.ImageIndex) {
	t.Helper()
	if err := remote.WriteIndex(r.ref(t, ref), idx); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
}

func (r *Registry) ref(t testing.TB, ref string) name.Reference {
	t.Helper()
	n, err := name.ParseReference(r.Host + "/" + ref)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// BlobPath is the API path of a blob of repo.
func BlobPath(repo string, d v1.Hash) string { return "/v2/" + repo + "/blobs/" + d.String() }

// ManifestPath is the API path of a manifest of repo by tag or digest.
func ManifestPath(repo, ref string) string { return "/v2/" + repo + "/manifests/" + ref }

func nopLogger() *log.Logger { return log.New(io.Discard, "", 0) }
