package oci

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/oci/ocitest"
)

// mirror is a Handler over a fixture registry, served on loopback.
type mirror struct {
	*httptest.Server
	h    *Handler
	reg  *ocitest.Registry
	host string

	mu      sync.Mutex
	records []*fetch.Record
}

func newMirror(t *testing.T, reg *ocitest.Registry, extraPolicy string) *mirror {
	t.Helper()
	return newMirrorWith(t, reg, "sources:\n  registries:\n    oci: ["+reg.URL+"/v2/library/]\n"+extraPolicy)
}

// newMirrorWith is newMirror with the policy in yaml.
func newMirrorWith(t *testing.T, reg *ocitest.Registry, yaml string) *mirror {
	t.Helper()
	pol, err := policies.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policies.New(pol)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	m := &mirror{reg: reg}
	env := &fetch.Env{Cache: c, Policy: eng, Log: hclog.NewNullLogger(), MetaTTL: time.Minute, MaxArtifact: 64 << 20, Now: time.Now,
		Upstream: &fetch.Upstream{HTTP: &http.Client{}, MaxMeta: 16 << 20},
		Record:   func(r *fetch.Record) { m.mu.Lock(); m.records = append(m.records, r); m.mu.Unlock() },
		Filter:   func(*fetch.Filtered) {}}
	u, _ := url.Parse(reg.URL)
	m.h = New(env, u)
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := strings.CutPrefix(r.URL.EscapedPath(), Prefix)
		if !ok {
			http.NotFound(w, r)
			return
		}
		if err := m.h.Serve(w, r, p); err != nil {
			m.h.WriteError(w, r, err)
		}
	}))
	m.host = strings.TrimPrefix(m.URL, "http://")
	t.Cleanup(m.Close)
	return m
}

// ref is an image reference on the mirror (127.0.0.1:port, so plain http).
func (m *mirror) ref(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(m.host + "/" + s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (m *mirror) get(t *testing.T, path string, hdr ...string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", m.URL+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// wait waits for n records: a handler records after the last byte, which
// the client may have read before.
func (m *mirror) wait(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(m.all()) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d records, want %d", len(m.all()), n)
		}
	}
}

// fetch is get for a manifest or a blob, which is recorded: it returns
// once the record is there.
func (m *mirror) fetch(t *testing.T, path string) (int, []byte, http.Header) {
	t.Helper()
	n := len(m.all())
	code, b, hdr := m.get(t, path)
	m.wait(t, n+1)
	return code, b, hdr
}

func (m *mirror) all() []*fetch.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*fetch.Record(nil), m.records...)
}

func (m *mirror) last() *fetch.Record {
	rs := m.all()
	if len(rs) == 0 {
		return &fetch.Record{}
	}
	return rs[len(rs)-1]
}

// byHash finds the record of digest d.
func (m *mirror) byHash(d v1.Hash) *fetch.Record {
	for _, r := range m.all() {
		if r.Hash == d.String() {
			return r
		}
	}
	return nil
}

// readAll reads every layer of img, which verifies them client-side too.
func readAll(img v1.Image) error {
	if _, err := img.RawConfigFile(); err != nil {
		return err
	}
	ls, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range ls {
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// digestsOf are the manifest, config and layer digests of img.
func digestsOf(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	out := []v1.Hash{d, m.Config.Digest}
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	return out
}

// TestPull: go-containerregistry's client pulls an image by tag through
// the mirror and reads every layer; every digest is verified and
// recorded, and a second pull comes from the cache.
func TestPull(t *testing.T) {
	reg := ocitest.Start(t)
	want := ocitest.Image(t, 4096, 3)
	reg.Push(t, "library/alpine:3.19", want)
	m := newMirror(t, reg, "")
	for i, hit := range []bool{false, true} {
		img, err := remote.Image(m.ref(t, "library/alpine:3.19"))
		if err != nil {
			t.Fatalf("pull #%d: %v", i, err)
		}
		if err := readAll(img); err != nil {
			t.Fatalf("pull #%d: reading the layers: %v", i, err)
		}
		m.wait(t, 5)
		for j, d := range digestsOf(t, want) {
			r := m.byHash(d)
			if r == nil {
				t.Fatalf("pull #%d: no record of %s", i, d)
			}
			if r.Outcome != fetch.Served || !r.Verified || r.Name != "library/alpine" || r.Bytes == 0 {
				t.Errorf("pull #%d: record of %s = %+v", i, d, *r)
			}
			if j == 0 && r.Version != "3.19" || j > 0 && r.Version != d.String() {
				t.Errorf("pull #%d: record of %s has version %q", i, d, r.Version)
			}
		}
		if n := len(m.all()); n != 5 {
			t.Errorf("pull #%d: %d records, want 5 per pull (manifest, config, 3 layers)", i, n)
		}
		if r := m.last(); r.CacheHit != hit {
			t.Errorf("pull #%d: cache hit %v, want %v", i, r.CacheHit, hit)
		}
		m.mu.Lock()
		m.records = nil
		m.mu.Unlock()
	}
	for _, d := range digestsOf(t, want)[1:] {
		if n := reg.Count(ocitest.BlobPath("library/alpine", d)); n != 1 {
			t.Errorf("upstream requests for blob %s = %d, want 1", d, n)
		}
	}
}

// TestHead: a HEAD of a manifest by tag gives its digest, media type and
// size, as clients that check a tag before pulling need.
func TestHead(t *testing.T) {
	reg := ocitest.Start(t)
	img := ocitest.Image(t, 512, 1)
	reg.Push(t, "library/alpine:3.19", img)
	m := newMirror(t, reg, "")
	d, err := remote.Head(m.ref(t, "library/alpine:3.19"))
	if err != nil {
		t.Fatal(err)
	}
	size, _ := img.Size()
	if want := digestsOf(t, img)[0]; d.Digest != want || d.Size != size || d.MediaType == "" {
		t.Errorf("HEAD = %+v, want digest %s of %d bytes", d, want, size)
	}
}

// TestPullIndex: a multi-platform index and its images pulled by tag;
// the images' manifests are fetched by digest, verified against the
// index's digests and sizes.
func TestPullIndex(t *testing.T) {
	reg := ocitest.Start(t)
	idx := ocitest.Index(t, 1024, 2, 2)
	reg.PushIndex(t, "library/multi:1", idx)
	m := newMirror(t, reg, "")
	got, err := remote.Index(m.ref(t, "library/multi:1"))
	if err != nil {
		t.Fatal(err)
	}
	im, err := got.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		img, err := got.Image(d.Digest)
		if err != nil {
			t.Fatalf("image %s: %v", d.Digest, err)
		}
		if err := readAll(img); err != nil {
			t.Fatalf("image %s: %v", d.Digest, err)
		}
	}
	m.wait(t, 9)
	for _, d := range im.Manifests {
		if r := m.byHash(d.Digest); r == nil || !r.Verified || r.Version != d.Digest.String() || r.Bytes != d.Size {
			t.Errorf("record of child manifest %s = %+v", d.Digest, r)
		}
	}
	if d, _ := idx.Digest(); m.byHash(d) == nil || m.byHash(d).Version != "1" {
		t.Errorf("no record of the index %s by its tag", d)
	}
	if n := len(m.all()); n != 1+2*(1+1+2) {
		t.Errorf("%d records, want 9 (index; per image: manifest, config, 2 layers)", n)
	}
}

// TestTamperedBlob: a blob whose bytes do not match its digest (same size,
// one bit flipped) fails the pull, is recorded as a hash mismatch, and is
// neither served nor cached.
func TestTamperedBlob(t *testing.T) {
	reg := ocitest.Start(t)
	img := ocitest.Image(t, 4096, 2)
	reg.Push(t, "library/alpine:3.19", img)
	layer := digestsOf(t, img)[3]
	reg.Tamper(ocitest.BlobPath("library/alpine", layer), func(b []byte) []byte {
		b = bytes.Clone(b)
		b[len(b)/2] ^= 1
		return b
	})
	m := newMirror(t, reg, "")
	pulled, err := remote.Image(m.ref(t, "library/alpine:3.19"))
	if err != nil {
		t.Fatal(err)
	}
	if err := readAll(pulled); err == nil || !strings.Contains(err.Error(), "DENIED: sandtrail mirror: hash_mismatch") {
		t.Errorf("reading a tampered layer = %v, want the mirror's DENIED hash_mismatch", err)
	}
	m.wait(t, 4)
	r := m.byHash(layer)
	if r == nil || r.Outcome != fetch.HashMismatch || r.Verified || r.Name != "library/alpine" {
		t.Fatalf("record of the tampered layer = %+v, want hash_mismatch", r)
	}
	if _, _, err := m.h.env.Cache.Get(m.h.upstream + "library/alpine/blobs/" + layer.String()); err == nil {
		t.Error("the tampered blob is in the cache")
	}
	code, b, _ := m.get(t, ocitest.BlobPath("library/alpine", layer))
	if code != 403 || !strings.Contains(string(b), fetch.HashMismatch) {
		t.Errorf("GET tampered blob = %d %s", code, b)
	}
}

// TestTamperedManifest: a manifest fetched by digest whose bytes do not
// match is refused; so is a manifest by tag whose Docker-Content-Digest
// differs from its bytes. Without a Docker-Content-Digest, the mirror
// sends the digest of what it serves.
func TestTamperedManifest(t *testing.T) {
	reg := ocitest.Start(t)
	img := ocitest.Image(t, 1024, 1)
	reg.Push(t, "library/alpine:3.19", img)
	reg.Push(t, "library/alpine:other", ocitest.Image(t, 1024, 1))
	d := digestsOf(t, img)[0]
	reg.Tamper(ocitest.ManifestPath("library/alpine", d.String()), func(b []byte) []byte { return append(bytes.Clone(b), ' ') })
	m := newMirror(t, reg, "")
	if _, err := remote.Image(m.ref(t, "library/alpine@"+d.String())); err == nil || !strings.Contains(err.Error(), "DENIED: sandtrail mirror: hash_mismatch") {
		t.Errorf("pulling a tampered manifest by digest = %v, want the mirror's DENIED hash_mismatch", err)
	}
	if r := m.last(); r.Outcome != fetch.HashMismatch || r.Hash != d.String() {
		t.Errorf("record = %+v, want hash_mismatch of %s", *r, d)
	}
	reg.SendDigest(ocitest.ManifestPath("library/alpine", "other"), d.String())
	code, b, _ := m.get(t, ocitest.ManifestPath("library/alpine", "other"))
	if r := m.last(); code != 403 || r.Outcome != fetch.HashMismatch {
		t.Errorf("tag with a wrong Docker-Content-Digest = %d %s, record %+v", code, b, *r)
	}
	reg.SendDigest(ocitest.ManifestPath("library/alpine", "3.19"), "")
	code, b, hdr := m.fetch(t, ocitest.ManifestPath("library/alpine", "3.19"))
	if code != 200 || hdr.Get("Docker-Content-Digest") != d.String() || sha256Digest(b) != d.String() || m.last().Hash != d.String() {
		t.Errorf("tag without Docker-Content-Digest = %d, digest %q, record %+v, want %s", code, hdr.Get("Docker-Content-Digest"), m.last(), d)
	}
	if hdr.Get("Content-Type") != "application/vnd.docker.distribution.manifest.v2+json" {
		t.Errorf("Content-Type = %q", hdr.Get("Content-Type"))
	}
}

// TestManifestTooLarge: a manifest over maxManifest is refused, by tag
// and by digest.
func TestManifestTooLarge(t *testing.T) {
	reg := ocitest.Start(t)
	img := ocitest.Image(t, 1024, 1)
	reg.Push(t, "library/big:1", img)
	d := digestsOf(t, img)[0]
	pad := func(b []byte) []byte { return append(bytes.Clone(b), bytes.Repeat([]byte(" "), maxManifest)...) }
	reg.Tamper(ocitest.ManifestPath("library/big", "1"), pad)
	reg.Tamper(ocitest.ManifestPath("library/big", d.String()), pad)
	m := newMirror(t, reg, "")
	for _, ref := range []string{"1", d.String()} {
		code, b, _ := m.get(t, ocitest.ManifestPath("library/big", ref))
		if r := m.last(); code != 403 || r.Outcome != fetch.HashMismatch || !strings.Contains(r.Reason, "larger") && !strings.Contains(r.Reason, "more than") {
			t.Errorf("oversized manifest %s = %d %s, record %+v", ref, code, b, *r)
		}
	}
}

// TestPolicy: the policy decides per image: a blocklisted tag and a
// repository outside the approved sources are refused before any upstream
// request, and recorded.
func TestPolicy(t *testing.T) {
	reg := ocitest.Start(t)
	reg.Push(t, "library/alpine:3.1", ocitest.Image(t, 512, 1))
	reg.Push(t, "other/tool:1", ocitest.Image(t, 512, 1))
	m := newMirror(t, reg, "blocklist:\n  - purl: pkg:oci/library/alpine@3.1\n    reason: a test\n")
	_, err := remote.Image(m.ref(t, "library/alpine:3.1"))
	if r := m.last(); err == nil || r.Outcome != fetch.Blocked || r.Rule == "" || r.Version != "3.1" {
		t.Errorf("blocklisted tag = %v, record %+v", err, *r)
	}
	code, b, _ := m.get(t, ocitest.ManifestPath("other/tool", "1"))
	if r := m.last(); code != 403 || r.Outcome != fetch.UnknownSource || !strings.Contains(string(b), fetch.UnknownSource) {
		t.Errorf("unapproved repository = %d %s, record %+v", code, b, *r)
	}
	for _, p := range []string{ocitest.ManifestPath("library/alpine", "3.1"), ocitest.ManifestPath("other/tool", "1")} {
		if n := reg.Count(p); n != 0 {
			t.Errorf("upstream requests for %s = %d, want 0", p, n)
		}
	}
}

// TestBadPaths: invalid names, references and digests, and traversal,
// are refused before any upstream request.
func TestBadPaths(t *testing.T) {
	reg := ocitest.Start(t)
	m := newMirror(t, reg, "")
	hex := strings.Repeat("ab", 32)
	for _, p := range []string{"/v2/../etc/passwd/manifests/latest", "/v2/library/..%2f..%2fetc/manifests/latest",
		"/v2/library/alpine/manifests/..%2f..%2fx", "/v2/Library/alpine/manifests/latest", "/v2/library//alpine/manifests/latest",
		"/v2/library/alpine/manifests/" + strings.Repeat("a", 129), "/v2/library/alpine/manifests/-x",
		"/v2/library/alpine/manifests/sha256:" + strings.ToUpper(hex), "/v2/library/alpine/blobs/latest",
		"/v2/library/alpine/blobs/md5:" + hex, "/v2/library/alpine/blobs/sha256:" + hex[:60], "/v2/library/alpine/blobs/sha256:" + hex + "%00",
		"/v2/library/alpine", "/v2/library/alpine/tags/list?n=x", "/v2/" + strings.Repeat("a/", 129) + "manifests/latest"} {
		code, b, _ := m.get(t, p)
		if code != 400 && code != 404 {
			t.Errorf("GET %s = %d %s, want 400 or 404", p, code, b)
		}
	}
	if reg.Count("/v2/library/alpine/manifests/latest") != 0 || len(m.all()) != 0 {
		t.Errorf("bad paths reached the upstream or were recorded: %d records", len(m.all()))
	}
}

// TestBase: the API version check.
func TestBase(t *testing.T) {
	m := newMirror(t, ocitest.Start(t), "")
	code, _, hdr := m.get(t, "/v2/")
	if code != 200 || hdr.Get("Docker-Distribution-API-Version") != "registry/2.0" {
		t.Errorf("GET /v2/ = %d %v", code, hdr)
	}
}

// TestTags: the tag list, from the upstream.
func TestTags(t *testing.T) {
	reg := ocitest.Start(t)
	reg.Push(t, "library/alpine:3.19", ocitest.Image(t, 512, 1))
	reg.Push(t, "library/alpine:3.20", ocitest.Image(t, 512, 1))
	m := newMirror(t, reg, "")
	tags, err := remote.List(m.ref(t, "library/alpine").Context())
	if err != nil || strings.Join(tags, ",") != "3.19,3.20" {
		t.Errorf("tags = %v, %v", tags, err)
	}
}

// TestTokenAuth: an upstream that demands anonymous bearer tokens (as
// Docker Hub does) is pulled from.
func TestTokenAuth(t *testing.T) {
	reg := ocitest.Start(t)
	img := ocitest.Image(t, 1024, 2)
	reg.Push(t, "library/alpine:3.19", img)
	reg.RequireToken("s3cret")
	m := newMirror(t, reg, "")
	pulled, err := remote.Image(m.ref(t, "library/alpine:3.19"))
	if err == nil {
		err = readAll(pulled)
	}
	if err != nil {
		t.Fatal(err)
	}
	if n := reg.Count("/token"); n != 1 {
		t.Errorf("token requests = %d, want 1 (kept for the repository)", n)
	}
}

// TestStale: with the upstream gone, a tag's manifest comes from the
// cache and says so.
func TestStale(t *testing.T) {
	reg := ocitest.Start(t)
	reg.Push(t, "library/alpine:3.19", ocitest.Image(t, 512, 1))
	m := newMirror(t, reg, "")
	m.h.env.MetaTTL = 0
	if code, _, _ := m.get(t, ocitest.ManifestPath("library/alpine", "3.19")); code != 200 {
		t.Fatalf("warm = %d", code)
	}
	reg.Close()
	if code, _, _ := m.fetch(t, ocitest.ManifestPath("library/alpine", "3.19")); code != 200 || !m.last().MetadataStale {
		t.Errorf("with the upstream down = %d, record %+v", code, m.last())
	}
	if code, _, _ := m.get(t, ocitest.ManifestPath("library/alpine", "3.20")); code != 502 {
		t.Errorf("uncached tag with the upstream down = %d, want 502", code)
	}
}

// TestCoalesce: concurrent requests for one blob fetch it once.
func TestCoalesce(t *testing.T) {
	reg := ocitest.Start(t)
	img := ocitest.Image(t, 1<<20, 1)
	reg.Push(t, "library/alpine:3.19", img)
	layer := digestsOf(t, img)[2]
	m := newMirror(t, reg, "")
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if code, _, _ := m.get(t, ocitest.BlobPath("library/alpine", layer)); code != 200 {
				t.Errorf("GET = %d", code)
			}
		})
	}
	wg.Wait()
	if n := reg.Count(ocitest.BlobPath("library/alpine", layer)); n != 1 {
		t.Errorf("upstream blob requests = %d, want 1", n)
	}
}

// TestCachedBlobSize: a blob fetched before any manifest named it (its
// size unknown) is cached; once a manifest gives it another size, the
// cache hit is refused as a fetch would be, not served.
func TestCachedBlobSize(t *testing.T) {
	reg := ocitest.Start(t)
	img := ocitest.Image(t, 2048, 1)
	reg.Push(t, "library/alpine:3.19", img)
	layer := digestsOf(t, img)[2]
	m := newMirror(t, reg, "")
	if code, b, _ := m.fetch(t, ocitest.BlobPath("library/alpine", layer)); code != 200 {
		t.Fatalf("GET blob = %d %s", code, b)
	}
	raw, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	mf, _ := img.Manifest()
	size := strconv.FormatInt(mf.Layers[0].Size, 10)
	lied := bytes.Replace(raw, []byte(`"size":`+size+`,"digest":"`+layer.String()), []byte(`"size":`+size+`1,"digest":"`+layer.String()), 1)
	if bytes.Equal(lied, raw) {
		t.Fatalf("the layer's size is not in the manifest: %s", raw)
	}
	tag := ocitest.ManifestPath("library/alpine", "3.19")
	reg.SendDigest(tag, sha256Digest(lied))
	reg.Tamper(tag, func([]byte) []byte { return lied })
	if code, b, _ := m.fetch(t, tag); code != 200 {
		t.Fatalf("GET manifest = %d %s", code, b)
	}
	code, b, _ := m.fetch(t, ocitest.BlobPath("library/alpine", layer))
	if r := m.last(); code != 403 || r.Outcome != fetch.HashMismatch || !strings.Contains(r.Reason, "cached") {
		t.Errorf("cached blob of another size than its manifest's = %d (%d bytes), record %+v, want a 403 hash_mismatch", code, len(b), *r)
	}
}

// TestTamperedCachedBlobRefetched: a cached blob whose file is no longer the size
// it was stored with is not served: it is fetched again. (The blob is
// large enough to be served from its file; cache.TestOpenBody has the
// small ones, served from memory.)
func TestTamperedCachedBlobRefetched(t *testing.T) {
	reg := ocitest.Start(t)
	img := ocitest.Image(t, 128<<10, 1)
	reg.Push(t, "library/alpine:3.19", img)
	layer := digestsOf(t, img)[2]
	path := ocitest.BlobPath("library/alpine", layer)
	m := newMirror(t, reg, "")
	if code, _, _ := m.fetch(t, path); code != 200 {
		t.Fatalf("GET blob = %d", code)
	}
	_, f, err := m.h.env.Cache.Get(m.h.upstream + "library/alpine/blobs/" + layer.String())
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Truncate(f.Name(), 100); err != nil {
		t.Fatal(err)
	}
	code, b, _ := m.fetch(t, path)
	if r := m.last(); code != 200 || sha256Digest(b) != layer.String() || r.CacheHit || reg.Count(path) != 2 {
		t.Errorf("truncated cached blob = %d (%d bytes), record %+v, upstream requests %d, want it fetched again", code, len(b), *r, reg.Count(path))
	}
}

// TestRedirect: a blob the upstream redirects to another host is fetched
// from there only when the policy approves that host as an OCI source,
// and its record names the URL the bytes came from, on a cache hit too;
// a redirect to a host the policy does not approve is not followed, and
// is recorded as a refusal.
func TestRedirect(t *testing.T) {
	reg := ocitest.Start(t)
	img := ocitest.Image(t, 2048, 1)
	reg.Push(t, "library/alpine:3.19", img)
	layer := digestsOf(t, img)[2]
	path := ocitest.BlobPath("library/alpine", layer)
	_, blob, _ := newMirror(t, reg, "").get(t, path)
	var cdnHits sync.Map
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := cdnHits.LoadOrStore(r.URL.Path, new(int))
		*n.(*int)++
		w.Write(blob)
	}))
	t.Cleanup(cdn.Close)
	reg.Redirect(path, cdn.URL+"/blobs/"+layer.Hex+"?X-Amz-Signature=s3cr3t")

	m := newMirror(t, reg, "")
	code, b, _ := m.fetch(t, path)
	if r := m.last(); code != 403 || r.Outcome != fetch.UnknownSource || r.Verdict != "block" || r.Rule != fetch.RuleRedirect ||
		!strings.Contains(r.Reason, cdn.URL) || !strings.Contains(string(b), "not an approved source") {
		t.Errorf("redirect to an unapproved host = %d %s, record %+v", code, b, *r)
	}
	if _, ok := cdnHits.Load("/blobs/" + layer.Hex); ok {
		t.Error("the mirror followed a redirect to an unapproved host")
	}

	m = newMirrorWith(t, reg, "sources:\n  registries:\n    oci: ["+reg.URL+"/v2/library/, "+cdn.URL+"/blobs/]\n")
	for _, hit := range []bool{false, true} {
		code, b, _ := m.fetch(t, path)
		if r := m.last(); code != 200 || sha256Digest(b) != layer.String() || r.Outcome != fetch.Served || r.CacheHit != hit ||
			!strings.HasPrefix(r.URL, cdn.URL+"/blobs/"+layer.Hex) || r.Registry != m.h.upstream {
			t.Errorf("redirect to an approved host (cache hit %v) = %d, record %+v, want served from %s", hit, code, *r, cdn.URL)
		}
	}
}

// TestErrorBodies: the mirror's errors are in the distribution spec's
// form, so that clients show why: go-containerregistry's error carries the
// code and the mirror's message, and each failure has the spec's code.
func TestErrorBodies(t *testing.T) {
	reg := ocitest.Start(t)
	reg.Push(t, "library/alpine:3.1", ocitest.Image(t, 512, 1))
	m := newMirror(t, reg, "blocklist:\n  - purl: pkg:oci/library/alpine@3.1\n    reason: a test\n")
	_, err := remote.Image(m.ref(t, "library/alpine:3.1"))
	if err == nil || !strings.Contains(err.Error(), "DENIED: sandtrail mirror: blocked: library/alpine@3.1 is refused by the policy (blocklist[0]): ") {
		t.Errorf("pulling a blocked tag = %v, want the spec's DENIED with the mirror's reason", err)
	}
	hex := strings.Repeat("ab", 32)
	for _, tt := range []struct{ path, code string }{
		{ocitest.ManifestPath("library/alpine", "3.1"), "DENIED"},
		{ocitest.ManifestPath("library/alpine", "nope"), "MANIFEST_UNKNOWN"},
		{ocitest.BlobPath("library/alpine", v1.Hash{Algorithm: "sha256", Hex: hex}), "BLOB_UNKNOWN"},
		{"/v2/Library/alpine/manifests/latest", "NAME_INVALID"},
		{"/v2/library/alpine/blobs/sha256:" + hex[:60], "DIGEST_INVALID"},
	} {
		_, b, hdr := m.get(t, tt.path)
		var body struct {
			Errors []struct {
				Code, Message string
				Detail        map[string]string
			}
		}
		if err := json.Unmarshal(b, &body); err != nil || len(body.Errors) != 1 || body.Errors[0].Code != tt.code ||
			!strings.HasPrefix(body.Errors[0].Message, "sandtrail mirror: ") || hdr.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s = %s (%v), want one error %s", tt.path, b, err, tt.code)
		}
	}
}

// TestUpstreamForms: an upstream given with the /v2/ that clients add is
// the same registry as one given without it, not /v2/v2/.
func TestUpstreamForms(t *testing.T) {
	env := &fetch.Env{Upstream: &fetch.Upstream{}}
	for _, raw := range []string{"https://r.example", "https://r.example/", "https://r.example/v2", "https://r.example/v2/"} {
		u, _ := url.Parse(raw)
		if got := New(env, u).upstream; got != "https://r.example/v2/" {
			t.Errorf("New(%s).upstream = %s, want https://r.example/v2/", raw, got)
		}
	}
}
