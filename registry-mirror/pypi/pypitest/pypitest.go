// Package pypitest is a fixture Python package index for tests: it
// generates real wheels (and optionally sdists) for the projects a test
// defines and serves them as PyPI does, on loopback: a PEP 691 JSON simple
// index (with PEP 700's upload-time and size, PEP 592's yanked and PEP
// 714's core-metadata) on one server, and the files, with their PEP 658
// metadata files, on another, as files.pythonhosted.org holds PyPI's. It
// counts the requests for each path, and can be told to tamper with a file
// or a metadata file, or to leave a file's sha256 out of the index.
//
// It trusts its tests; it is not for use outside them.
package pypitest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Version is one version of a fixture project.
type Version struct {
	Version string
	// Uploaded is when its files were uploaded (default: 30 days ago).
	Uploaded time.Time
	// Yanked marks it yanked (PEP 592), with YankedReason when not empty.
	Yanked       bool
	YankedReason string
	// RequiresPython and Deps (Requires-Dist) go into its metadata.
	RequiresPython string
	Deps           []string
	// Sdist publishes an sdist beside the wheel.
	Sdist bool
}

// Project is a fixture project.
type Project struct {
	Name     string
	Versions []Version
}

// Index is a running fixture index: Server is the index, Files the host
// of its files.
type Index struct {
	*httptest.Server
	Files *httptest.Server

	mu       sync.Mutex
	projects map[string]*Project // by normal name
	blobs    map[string][]byte   // file server path → bytes
	counts   map[string]int
	tamper   map[string]bool // file server path → serve other bytes
	noHash   map[string]bool // file name → no sha256 in the index
}

// Start starts an index with projects on loopback, closed when the test
// ends.
func Start(t testing.TB, projects ...Project) *Index {
	t.Helper()
	ix := &Index{projects: map[string]*Project{}, blobs: map[string][]byte{}, counts: map[string]int{},
		tamper: map[string]bool{}, noHash: map[string]bool{}}
	ix.Server = httptest.NewServer(http.HandlerFunc(ix.serveIndex))
	ix.Files = httptest.NewServer(http.HandlerFunc(ix.serveFile))
	t.Cleanup(ix.Close)
	t.Cleanup(ix.Files.Close)
	for _, p := range projects {
		ix.Add(p)
	}
	return ix
}

// SimpleURL is the index's URL, the mirror's upstream.
func (ix *Index) SimpleURL() string { return ix.URL + "/simple/" }

// Add adds (or replaces) a project.
func (ix *Index) Add(p Project) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	cp := p
	ix.projects[normalize(p.Name)] = &cp
	for _, v := range p.Versions {
		wheel := WheelName(p.Name, v.Version)
		ix.blobs[FilePath(p.Name, wheel)] = Wheel(p.Name, v)
		ix.blobs[FilePath(p.Name, wheel)+".metadata"] = Metadata(p.Name, v)
		if v.Sdist {
			ix.blobs[FilePath(p.Name, SdistName(p.Name, v.Version))] = Sdist(p.Name, v)
		}
	}
}

// Tamper makes the file (a wheel, sdist or .metadata file name) of
// project name be served with other bytes than the index's sha256 names.
func (ix *Index) Tamper(name, filename string) {
	ix.mu.Lock()
	ix.tamper[FilePath(name, filename)] = true
	ix.mu.Unlock()
}

// NoHash leaves the sha256 of a file out of the index.
func (ix *Index) NoHash(filename string) {
	ix.mu.Lock()
	ix.noHash[filename] = true
	ix.mu.Unlock()
}

// Count returns how many requests path ("/simple/x/", or FilePath's on
// the files host) received.
func (ix *Index) Count(path string) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.counts[path]
}

// FilePath is the path of a file of project name on the files host.
func FilePath(name, filename string) string { return "/packages/" + normalize(name) + "/" + filename }

// normalize is PEP 503's normal form of a name.
func normalize(name string) string { return strings.ReplaceAll(distName(name), "_", "-") }

// Sdist builds a version's sdist: a gzipped tar with its PKG-INFO.
func Sdist(name string, v Version) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	info := Metadata(name, v)
	tw.WriteHeader(&tar.Header{Name: distName(name) + "-" + v.Version + "/PKG-INFO", Mode: 0o644, Size: int64(len(info)),
		ModTime: time.Unix(499162500, 0), Typeflag: tar.TypeReg})
	tw.Write(info)
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// SHA256 is the hex sha256 of b.
func SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (ix *Index) count(r *http.Request) {
	ix.mu.Lock()
	ix.counts[r.URL.Path]++
	ix.mu.Unlock()
}

func (ix *Index) serveFile(w http.ResponseWriter, r *http.Request) {
	ix.count(r)
	ix.mu.Lock()
	b, ok := ix.blobs[r.URL.Path]
	if ix.tamper[r.URL.Path] {
		b = append(bytes.Clone(b), '\n')
	}
	ix.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(b)
}

func (ix *Index) serveIndex(w http.ResponseWriter, r *http.Request) {
	ix.count(r)
	if !strings.Contains(r.Header.Get("Accept"), "application/vnd.pypi.simple.v1+json") {
		http.Error(w, "this fixture index serves PEP 691 JSON only", http.StatusNotAcceptable)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/simple/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
	if rest == "" {
		json.NewEncoder(w).Encode(ix.root())
		return
	}
	ix.mu.Lock()
	p := ix.projects[strings.TrimSuffix(rest, "/")]
	ix.mu.Unlock()
	if p == nil || !strings.HasSuffix(rest, "/") {
		http.NotFound(w, r)
		return
	}
	json.NewEncoder(w).Encode(ix.page(p))
}

func (ix *Index) root() map[string]any {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var names []map[string]string
	for _, p := range ix.projects {
		names = append(names, map[string]string{"name": p.Name})
	}
	return map[string]any{"meta": map[string]string{"api-version": "1.1"}, "projects": names}
}

// page is the PEP 691 page of p.
func (ix *Index) page(p *Project) map[string]any {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	files, versions := []map[string]any{}, []string{}
	for _, v := range p.Versions {
		versions = append(versions, v.Version)
		names := []string{WheelName(p.Name, v.Version)}
		if v.Sdist {
			names = append(names, SdistName(p.Name, v.Version))
		}
		for _, n := range names {
			files = append(files, ix.fileEntry(p, v, n))
		}
	}
	return map[string]any{"meta": map[string]string{"api-version": "1.1"}, "name": normalize(p.Name), "files": files, "versions": versions}
}

// fileEntry is the page entry of file n of version v.
func (ix *Index) fileEntry(p *Project, v Version, n string) map[string]any {
	path := FilePath(p.Name, n)
	b := ix.blobs[path]
	up := v.Uploaded
	if up.IsZero() {
		up = time.Now().Add(-30 * 24 * time.Hour)
	}
	f := map[string]any{"filename": n, "url": ix.Files.URL + path, "hashes": map[string]string{}, "size": len(b),
		"upload-time": up.UTC().Format("2006-01-02T15:04:05.000000Z"), "yanked": false}
	if !ix.noHash[n] {
		f["hashes"] = map[string]string{"sha256": SHA256(b)}
	}
	if v.RequiresPython != "" {
		f["requires-python"] = v.RequiresPython
	}
	if v.Yanked {
		f["yanked"] = true
		if v.YankedReason != "" {
			f["yanked"] = v.YankedReason
		}
	}
	if m, ok := ix.blobs[path+".metadata"]; ok {
		f["core-metadata"] = map[string]string{"sha256": SHA256(m)}
	}
	return f
}
