// Package npmtest is a fixture npm registry for tests: it serves the
// packuments, tarballs and signing keys of packages the test defines, as
// the public registry does (full packuments with time, dist.integrity,
// dist.shasum and ECDSA P-256 dist.signatures), on loopback. It counts
// the requests for each path, and can be told to tamper with a tarball or
// a signature.
package npmtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Version is one version of a fixture package.
type Version struct {
	Version string
	// Published is its publish time (default: 30 days ago).
	Published time.Time
	// Deps are its dependencies (name → range).
	Deps map[string]string
	// Scripts are its package.json scripts (postinstall, …).
	Scripts map[string]string
	// Files are extra files in the tarball (path → content).
	Files map[string]string
	// Attested gives it a dist.attestations entry.
	Attested bool
	// Bundled are the dependencies its tarball carries (name → that
	// package's version, at package/node_modules/<name>/): each is in
	// bundleDependencies and in dependencies at its version.
	Bundled map[string]Version
	// BundleAll publishes bundledDependencies: true (npm's other
	// spelling; all of its dependencies) in place of the list of names.
	BundleAll bool
}

// bundleField is the field and value that publish v's bundled
// dependencies.
func (v Version) bundleField() (string, any) {
	if v.BundleAll {
		return "bundledDependencies", true
	}
	return "bundleDependencies", v.bundleNames()
}

// deps are v's dependencies, its bundled ones included.
func (v Version) deps() map[string]string {
	if len(v.Bundled) == 0 {
		return v.Deps
	}
	out := maps.Clone(v.Deps)
	if out == nil {
		out = map[string]string{}
	}
	for n, b := range v.Bundled {
		if _, ok := out[n]; !ok {
			out[n] = b.Version
		}
	}
	return out
}

// bundleNames are the names of v's bundled dependencies, sorted.
func (v Version) bundleNames() []string { return slices.Sorted(maps.Keys(v.Bundled)) }

// Package is a fixture package.
type Package struct {
	Name     string
	Versions []Version
	// Latest is its latest dist-tag (default: the last version).
	Latest string
}

// Registry is a running fixture registry.
type Registry struct {
	*httptest.Server
	key   *ecdsa.PrivateKey
	keyID string

	mu       sync.Mutex
	pkgs     map[string]*Package
	tarballs map[string][]byte // path → bytes
	counts   map[string]int
	tamper   map[string]bool // tarball path → serve other bytes
	badSig   map[string]bool // name@version → sign something else
	unsigned map[string]bool // name@version → no dist.signatures
	noKeys   bool            // /-/npm/v1/keys is a 404
}

// Start starts a registry with pkgs on loopback, closed when the test
// ends.
func Start(t testing.TB, pkgs ...Package) *Registry {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{key: key, keyID: "SHA256:fixture", pkgs: map[string]*Package{}, tarballs: map[string][]byte{},
		counts: map[string]int{}, tamper: map[string]bool{}, badSig: map[string]bool{}, unsigned: map[string]bool{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	for _, p := range pkgs {
		r.Add(p)
	}
	return r
}

// Add adds (or replaces) a package.
func (r *Registry) Add(p Package) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cp := p
	r.pkgs[p.Name] = &cp
	for _, v := range p.Versions {
		r.tarballs[tarballPath(p.Name, v.Version)] = Tarball(p.Name, v)
	}
}

// Tamper makes the tarball of name@version be served with other bytes
// than its integrity names.
func (r *Registry) Tamper(name, version string) {
	r.mu.Lock()
	r.tamper[tarballPath(name, version)] = true
	r.mu.Unlock()
}

// BadSignature makes the registry signature of name@version sign other
// content.
func (r *Registry) BadSignature(name, version string) {
	r.mu.Lock()
	r.badSig[name+"@"+version] = true
	r.mu.Unlock()
}

// Unsigned makes name@version carry no registry signature.
func (r *Registry) Unsigned(name, version string) {
	r.mu.Lock()
	r.unsigned[name+"@"+version] = true
	r.mu.Unlock()
}

// NoKeys makes the registry publish no signing keys (and no signatures),
// as some private registries and mirrors do.
func (r *Registry) NoKeys() {
	r.mu.Lock()
	r.noKeys = true
	r.mu.Unlock()
}

// Count returns how many requests path ("/left-pad", "/-/npm/v1/keys" or
// TarballPath's) received.
func (r *Registry) Count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[path]
}

// TarballPath is the registry path of a version's tarball.
func TarballPath(name, version string) string { return tarballPath(name, version) }

func tarballPath(name, version string) string {
	base := name
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		base = name[i+1:]
	}
	return "/" + name + "/-/" + base + "-" + version + ".tgz"
}

// Tarball builds the gzipped tarball of a version: package/package.json
// and its files, and each bundled dependency's under
// package/node_modules/<name>/.
func Tarball(name string, v Version) []byte {
	files := map[string]string{}
	addFiles(files, "package/", name, v)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, p := range sortedKeys(files) {
		c := files[p]
		tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(c)), ModTime: time.Unix(499162500, 0), Typeflag: tar.TypeReg})
		tw.Write([]byte(c))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// addFiles adds the package.json and files of name at v under dir, and
// those of its bundled dependencies under dir/node_modules/.
func addFiles(files map[string]string, dir, name string, v Version) {
	pj := map[string]any{"name": name, "version": v.Version}
	if d := v.deps(); len(d) > 0 {
		pj["dependencies"] = d
	}
	if len(v.Bundled) > 0 {
		k, b := v.bundleField()
		pj[k] = b
	}
	if len(v.Scripts) > 0 {
		pj["scripts"] = v.Scripts
	}
	pjb, _ := json.MarshalIndent(pj, "", "  ")
	files[dir+"package.json"] = string(pjb)
	for p, c := range v.Files {
		files[dir+p] = c
	}
	for _, n := range v.bundleNames() {
		addFiles(files, dir+"node_modules/"+n+"/", n, v.Bundled[n])
	}
}

// Integrity is the sha512 SRI of b.
func Integrity(b []byte) string {
	s := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(s[:])
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	p, _ := url.PathUnescape(req.URL.EscapedPath())
	r.mu.Lock()
	r.counts[p]++
	r.mu.Unlock()
	switch {
	case p == "/-/npm/v1/keys":
		r.mu.Lock()
		none := r.noKeys
		r.mu.Unlock()
		if none {
			http.NotFound(w, req)
			return
		}
		r.serveKeys(w)
	case strings.Contains(p, "/-/"):
		r.serveTarball(w, p)
	default:
		r.servePackument(w, strings.TrimPrefix(p, "/"))
	}
}

func (r *Registry) serveKeys(w http.ResponseWriter) {
	der, _ := x509.MarshalPKIXPublicKey(&r.key.PublicKey)
	json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{"keyid": r.keyID, "keytype": "ecdsa-sha2-nistp256",
		"scheme": "ecdsa-sha2-nistp256", "key": base64.StdEncoding.EncodeToString(der), "expires": ""}}})
}

func (r *Registry) serveTarball(w http.ResponseWriter, p string) {
	r.mu.Lock()
	b, ok := r.tarballs[p]
	if r.tamper[p] {
		b = append(bytes.Clone(b), 0)
	}
	r.mu.Unlock()
	if !ok {
		http.NotFound(w, nil)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(b)
}

func (r *Registry) servePackument(w http.ResponseWriter, name string) {
	r.mu.Lock()
	p, ok := r.pkgs[name]
	r.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintln(w, `{"error":"Not found"}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(r.packument(p))
}

// packument builds a full packument of p.
func (r *Registry) packument(p *Package) map[string]any {
	versions, times := map[string]any{}, map[string]string{}
	latest := p.Latest
	for _, v := range p.Versions {
		tb := r.tarballs[tarballPath(p.Name, v.Version)]
		s1 := sha1.Sum(tb)
		integrity := Integrity(tb)
		signed := p.Name + "@" + v.Version + ":" + integrity
		r.mu.Lock()
		if r.badSig[p.Name+"@"+v.Version] {
			signed += "x"
		}
		r.mu.Unlock()
		h := sha256.Sum256([]byte(signed))
		sig, _ := ecdsa.SignASN1(rand.Reader, r.key, h[:])
		dist := map[string]any{"tarball": r.URL + tarballPath(p.Name, v.Version), "integrity": integrity, "shasum": hex.EncodeToString(s1[:])}
		r.mu.Lock()
		if !r.noKeys && !r.unsigned[p.Name+"@"+v.Version] {
			dist["signatures"] = []map[string]string{{"keyid": r.keyID, "sig": base64.StdEncoding.EncodeToString(sig)}}
		}
		r.mu.Unlock()
		if v.Attested {
			dist["attestations"] = map[string]any{"url": r.URL + "/-/npm/v1/attestations/" + p.Name + "@" + v.Version,
				"provenance": map[string]string{"predicateType": "https://slsa.dev/provenance/v1"}}
		}
		m := map[string]any{"name": p.Name, "version": v.Version, "dist": dist}
		if d := v.deps(); len(d) > 0 {
			m["dependencies"] = d
		}
		if len(v.Bundled) > 0 {
			k, b := v.bundleField()
			m[k] = b
		}
		if len(v.Scripts) > 0 {
			m["scripts"] = v.Scripts
		}
		versions[v.Version] = m
		pub := v.Published
		if pub.IsZero() {
			pub = time.Now().Add(-30 * 24 * time.Hour)
		}
		times[v.Version] = pub.UTC().Format(time.RFC3339Nano)
		if p.Latest == "" {
			latest = v.Version
		}
	}
	times["created"] = "2020-01-01T00:00:00.000Z"
	return map[string]any{"name": p.Name, "dist-tags": map[string]string{"latest": latest}, "versions": versions, "time": times}
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// Tree is a fixture tree of n packages, each published 30 days ago with an
// index.js of about size bytes: pkg-i depends on pkg-(2i+1) and
// pkg-(2i+2), so installing pkg-0 installs all n.
func Tree(n, size int) []Package {
	var pkgs []Package
	old := time.Now().Add(-30 * 24 * time.Hour)
	for i := range n {
		deps := map[string]string{}
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < n {
				deps[fmt.Sprintf("pkg-%d", c)] = "^1.0.0"
			}
		}
		pkgs = append(pkgs, Package{Name: fmt.Sprintf("pkg-%d", i),
			Versions: []Version{{Version: "1.0.0", Published: old, Deps: deps, Files: map[string]string{"index.js": strings.Repeat("// x\n", size/5)}}}})
	}
	return pkgs
}
