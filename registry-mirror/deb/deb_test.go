package deb

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/deb/debtest"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch/fetchtest"
)

// mirror is a Handler over a fixture archive named "fixture", served on
// loopback beneath /debian/ and in HTTP-proxy mode, as the mirror serves
// it.
type mirror struct {
	*httptest.Server
	h    *Handler
	env  *fetchtest.Env
	arch *debtest.Archive
}

// newMirror serves arch, with its cache in cacheDir ("": a new one).
func newMirror(t *testing.T, arch *debtest.Archive, cacheDir string) *mirror {
	t.Helper()
	env := fetchtest.New(t, "sources:\n  registries:\n    deb: ["+arch.URL+"]\nblocklist:\n  - purl: pkg:deb/evil\n    reason: a test\n")
	if cacheDir != "" {
		c, err := cache.Open(cacheDir, 0)
		if err != nil {
			t.Fatal(err)
		}
		env.Cache = c
	}
	h, err := New(env.Env, map[string]string{"fixture": "[signed-by=" + arch.Keyring + "] " + arch.URL})
	if err != nil {
		t.Fatal(err)
	}
	m := &mirror{h: h, env: env, arch: arch}
	m.Server = fetchtest.Serve(t, "/debian/", func(w http.ResponseWriter, r *http.Request, p string) error {
		if r.URL.IsAbs() {
			p = r.URL.EscapedPath() // HTTP-proxy mode: the upstream's own path
		}
		return h.Serve(w, r, p)
	})
	return m
}

func (m *mirror) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	code, b, _ := fetchtest.Get(t, m.URL+"/debian/fixture/"+path)
	return code, b
}

func (m *mirror) last() fetch.Record { return m.env.Last() }

func (m *mirror) count() int { return len(m.env.Records()) }

var fixturePkgs = []debtest.Package{{Name: "hello", Version: "2.10-3"}, {Name: "evil", Version: "1.0-1"}}

// TestChain: the InRelease, the Packages file (by name and by hash) and
// the .deb are served after their checks; the .deb is recorded with its
// package, version, purl (with the Packages paragraph's architecture, as
// the apt broker spells it) and sha256, a cache miss then a hit, and nothing but
// refusals of index files is recorded.
func TestChain(t *testing.T) {
	arch := debtest.Start(t, debtest.Options{}, fixturePkgs...)
	m := newMirror(t, arch, "")
	if code, b := m.get(t, "dists/stable/InRelease"); code != 200 || string(b) != string(arch.File("dists/stable/InRelease")) {
		t.Fatalf("InRelease = %d %.200s", code, b)
	}
	pkgs := arch.File("dists/stable/main/binary-amd64/Packages.gz")
	if code, b := m.get(t, "dists/stable/main/binary-amd64/by-hash/SHA256/"+sha(pkgs)); code != 200 || string(b) != string(pkgs) {
		t.Fatalf("Packages.gz by hash = %d %.200s", code, b)
	}
	if m.count() != 0 {
		t.Errorf("index files served were recorded: %+v", m.last())
	}
	deb := arch.File(arch.Debs["hello"])
	for i, cache := range []string{"miss", "hit"} {
		code, b := m.get(t, arch.Debs["hello"])
		if code != 200 || string(b) != string(deb) {
			t.Fatalf("GET .deb #%d = %d %.200s", i, code, b)
		}
		r := m.last()
		if r.Outcome != fetch.Served || !r.Verified || r.Name != "hello" || r.Version != "2.10-3" || r.Hash != "sha256:"+sha(deb) ||
			r.CacheHit != (cache == "hit") || r.Ecosystem != "deb" || r.URL != arch.URL+arch.Debs["hello"] || r.Bytes != int64(len(deb)) ||
			r.Purl != "pkg:deb/debian/hello@2.10-3?arch=amd64" {
			t.Errorf("record #%d = %+v", i, r)
		}
	}
	if n := arch.Count(arch.Debs["hello"]); n != 1 {
		t.Errorf("upstream .deb fetches = %d, want 1", n)
	}
	if code, b := m.get(t, arch.Debs["evil"]); code != 403 || m.last().Outcome != fetch.Blocked || m.last().Name != "evil" {
		t.Errorf("blocklisted .deb = %d %s, record %+v", code, b, m.last())
	}
}

// TestArchOf: a Packages paragraph's Architecture is kept for the purl
// when it is one word of [a-z0-9-]; anything else is left out, and the
// paragraph still counts.
func TestArchOf(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "all", in: "all", want: "all"},
		{name: "amd64", in: "amd64", want: "amd64"},
		{name: "uncommon", in: "hurd-i386", want: "hurd-i386"},
		{name: "two words", in: "amd64 i386", want: ""},
		{name: "upper case", in: "AMD64", want: ""},
		{name: "purl syntax", in: "amd64&x=1", want: ""},
		{name: "too long", in: strings.Repeat("a", 33), want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := archOf([]field{{name: "architecture", value: tt.in}}); got != tt.want {
				t.Errorf("archOf(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	if got := archOf(nil); got != "" {
		t.Errorf("archOf(no field) = %q, want \"\"", got)
	}
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestRefusals: each broken link of the chain is refused with a 403, and
// recorded with its outcome.
func TestRefusals(t *testing.T) {
	past := time.Now().Add(-time.Hour)
	tests := []struct {
		name    string
		opts    debtest.Options
		corrupt string
		get     string // "deb": the hello .deb
		outcome string
		reason  string
	}{
		{name: "bad InRelease signature", corrupt: "dists/stable/InRelease", get: "dists/stable/InRelease", outcome: fetch.SignatureInvalid, reason: "signature"},
		{name: "index behind a bad signature", corrupt: "dists/stable/InRelease", get: "dists/stable/main/binary-amd64/Packages.gz", outcome: fetch.SignatureInvalid},
		{name: "expired", opts: debtest.Options{ValidUntil: past}, get: "dists/stable/InRelease", outcome: fetch.SignatureInvalid, reason: "Valid-Until"},
		{name: "corrupted Packages", corrupt: "dists/stable/main/binary-amd64/Packages.gz", get: "dists/stable/main/binary-amd64/Packages.gz", outcome: fetch.HashMismatch},
		{name: "unlisted index", get: "dists/stable/main/binary-amd64/Packages.bz2", outcome: fetch.Blocked, reason: "not listed"},
		{name: "deb of no verified Packages", get: "deb", outcome: fetch.Blocked, reason: "no verified Packages"},
		{name: "corrupted deb", corrupt: "deb", get: "deb", outcome: fetch.HashMismatch},
		{name: "bad detached signature", opts: debtest.Options{NoInRelease: true}, corrupt: "dists/stable/Release", get: "dists/stable/Release", outcome: fetch.SignatureInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arch := debtest.Start(t, tt.opts, fixturePkgs...)
			m := newMirror(t, arch, "")
			if tt.corrupt == "deb" {
				tt.corrupt = arch.Debs["hello"]
				// The deb is listed: fetch the Packages file first.
				if code, b := m.get(t, "dists/stable/main/binary-amd64/Packages.gz"); code != 200 {
					t.Fatalf("Packages.gz = %d %s", code, b)
				}
			}
			if tt.get == "deb" {
				tt.get = arch.Debs["hello"]
			}
			if tt.corrupt != "" {
				arch.Corrupt(tt.corrupt)
			}
			code, b := m.get(t, tt.get)
			r := m.last()
			if code != 403 || r.Outcome != tt.outcome || !strings.Contains(r.Reason, tt.reason) || r.Verified {
				t.Errorf("GET %s = %d %s; record %+v, want 403 and %s (%q)", tt.get, code, b, r, tt.outcome, tt.reason)
			}
		})
	}
}

// TestDetached: an archive with only Release and Release.gpg is verified
// by the detached signature, and its .debs are served.
func TestDetached(t *testing.T) {
	arch := debtest.Start(t, debtest.Options{NoInRelease: true}, fixturePkgs...)
	m := newMirror(t, arch, "")
	if code, _ := m.get(t, "dists/stable/InRelease"); code != 404 {
		t.Errorf("InRelease = %d, want 404 (apt then asks for Release)", code)
	}
	for _, p := range []string{"dists/stable/Release", "dists/stable/Release.gpg", "dists/stable/main/binary-amd64/Packages", arch.Debs["hello"]} {
		if code, b := m.get(t, p); code != 200 || string(b) != string(arch.File(p)) {
			t.Errorf("GET %s = %d %.200s", p, code, b)
		}
	}
}

// TestRestart: a mirror restarted on the same cache still knows which
// Packages files it verified, and serves their .debs.
func TestRestart(t *testing.T) {
	arch := debtest.Start(t, debtest.Options{}, fixturePkgs...)
	dir := t.TempDir()
	m := newMirror(t, arch, dir)
	if code, _ := m.get(t, "dists/stable/main/binary-amd64/Packages"); code != 200 {
		t.Fatal("Packages not served")
	}
	m2 := newMirror(t, arch, dir)
	if code, b := m2.get(t, arch.Debs["hello"]); code != 200 || m2.last().Version != "2.10-3" {
		t.Errorf("after a restart, .deb = %d %s %+v", code, b, m2.last())
	}
}

// TestProxyMode: an absolute-URI request for the archive's own URL is
// served; one for another path of its host is refused and recorded.
func TestProxyMode(t *testing.T) {
	arch := debtest.Start(t, debtest.Options{}, fixturePkgs...)
	m := newMirror(t, arch, "")
	get := func(u string) int {
		c, err := net.Dial("tcp", m.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", u)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(arch.URL + "dists/stable/InRelease"); code != 200 {
		t.Errorf("proxy InRelease = %d", code)
	}
	if code := get(arch.Server.URL + "/other/dists/stable/InRelease"); code != 403 || m.last().Outcome != fetch.UnknownSource {
		t.Errorf("proxy request off the archive = %d, record %+v", code, m.last())
	}
}

// TestPaths: paths that could leave the archive, or that it does not
// serve, are refused before anything is fetched.
func TestPaths(t *testing.T) {
	arch := debtest.Start(t, debtest.Options{}, fixturePkgs...)
	m := newMirror(t, arch, "")
	for _, p := range []string{"fixture/dists/%2e%2e/%2e%2e/etc/passwd", "fixture/dists/stable/..", "fixture/pool/a%2fb.deb",
		"fixture/dists//InRelease", "fixture/dists/stable/.hidden", "fixture/dists/st\x00able/InRelease", "nope/dists/stable/InRelease",
		"fixture/README", "fixture/pool/main/h/hello/hello_2.10-3.dsc", "fixture/" + strings.Repeat("a/", 20) + "x"} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/debian/x", nil)
		err := m.h.Serve(w, r, p)
		if err == nil || fetch.Write(w, err).Status < 400 {
			t.Errorf("Serve(%q) = %v, want an error", p, err)
		}
	}
	if n := arch.Count("dists/stable/InRelease"); n != 0 {
		t.Errorf("bad paths reached the upstream: %d", n)
	}
}

// TestIndexBound: past the bound, the least recently used index is
// dropped from memory and rebuilt from the cache when it is needed.
func TestIndexBound(t *testing.T) {
	p := newPool(nil, nil)
	mk := func(n int) *index {
		idx := &index{files: map[string]debEntry{}}
		for i := range n {
			idx.files[fmt.Sprint(i)] = debEntry{}
		}
		return idx
	}
	p.add("a", mk(maxIndexed/2))
	p.add("b", mk(maxIndexed/2))
	p.loaded["a"].used = p.tick + 1 // a used last
	p.add("c", mk(10))
	if _, ok := p.loaded["b"]; ok || p.loaded["a"] == nil || p.entries != maxIndexed/2+10 {
		t.Errorf("after eviction: loaded %d, entries %d", len(p.loaded), p.entries)
	}
}

// TestCoalesce: concurrent requests fetch the InRelease, the Packages
// file and the .deb from the upstream once each.
func TestCoalesce(t *testing.T) {
	arch := debtest.Start(t, debtest.Options{}, fixturePkgs...)
	m := newMirror(t, arch, "")
	for _, p := range []string{"dists/stable/main/binary-amd64/Packages.gz", arch.Debs["hello"]} {
		var wg sync.WaitGroup
		for range 30 {
			wg.Go(func() {
				if code, b := m.get(t, p); code != 200 {
					t.Errorf("GET %s = %d %s", p, code, b)
				}
			})
		}
		wg.Wait()
	}
	for _, p := range []string{"dists/stable/InRelease", "dists/stable/main/binary-amd64/Packages.gz", arch.Debs["hello"]} {
		if n := arch.Count(p); n != 1 {
			t.Errorf("upstream requests for %s = %d, want 1", p, n)
		}
	}
}
