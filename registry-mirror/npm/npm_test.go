package npm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch/fetchtest"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// mirror is a Handler over a fixture registry, served on loopback.
type mirror struct {
	*httptest.Server
	*fetchtest.Env
	h   *Handler
	reg *npmtest.Registry
}

func newMirror(t *testing.T, reg *npmtest.Registry, extraPolicy string) *mirror {
	t.Helper()
	env := fetchtest.New(t, "sources:\n  registries:\n    npm: ["+reg.URL+"/]\ncooldown:\n  min_age: 48h\n  action: block\n"+extraPolicy)
	u, _ := url.Parse(reg.URL)
	m := &mirror{Env: env, reg: reg, h: New(env.Env, u, "/npm/")}
	m.Server = fetchtest.Serve(t, "/npm/", m.h.Serve)
	return m
}

func (m *mirror) get(t *testing.T, path, accept string) (int, []byte, http.Header) {
	t.Helper()
	if accept == "" {
		return fetchtest.Get(t, m.URL+path)
	}
	return fetchtest.Get(t, m.URL+path, "Accept", accept)
}

// last is the last record.
func (m *mirror) last() *fetch.Record {
	r := m.Last()
	return &r
}

var old = time.Now().Add(-30 * 24 * time.Hour)

func fixture() []npmtest.Package {
	return []npmtest.Package{
		{Name: "left-pad", Versions: []npmtest.Version{{Version: "1.2.0", Published: old, Attested: true}, {Version: "1.3.0", Published: old},
			{Version: "1.4.0", Published: time.Now().Add(-time.Hour)}}},
		{Name: "@scope/util", Versions: []npmtest.Version{{Version: "0.1.0", Published: old, Scripts: map[string]string{"postinstall": "node x.js"}}}},
	}
}

// TestPackument: tarball URLs point at the mirror, the version inside the
// cooldown is gone with latest repaired, the abbreviated form has only its
// fields, and the filtering is recorded once per session.
func TestPackument(t *testing.T) {
	m := newMirror(t, npmtest.Start(t, fixture()...), "")
	for _, accept := range []string{"application/json", abbreviated + "; q=1.0, application/json; q=0.8"} {
		code, b, hdr := m.get(t, "/npm/left-pad", accept)
		if code != 200 {
			t.Fatalf("GET packument (%s) = %d %s", accept, code, b)
		}
		var p struct {
			Name     string            `json:"name"`
			Tags     map[string]string `json:"dist-tags"`
			Time     map[string]string `json:"time"`
			Versions map[string]struct {
				Dist struct {
					Tarball   string `json:"tarball"`
					Integrity string `json:"integrity"`
				} `json:"dist"`
			} `json:"versions"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		if _, ok := p.Versions["1.4.0"]; ok || len(p.Versions) != 2 || p.Tags["latest"] != "1.3.0" {
			t.Errorf("versions %v latest %q, want 1.2.0 and 1.3.0, latest 1.3.0", keys(p.Versions), p.Tags["latest"])
		}
		if want := m.URL + "/npm/left-pad/-/left-pad-1.3.0.tgz"; p.Versions["1.3.0"].Dist.Tarball != want {
			t.Errorf("tarball = %q, want %q", p.Versions["1.3.0"].Dist.Tarball, want)
		}
		abbrev := strings.HasPrefix(accept, abbreviated)
		if abbrev != (hdr.Get("Content-Type") == abbreviated) || abbrev != (p.Time == nil) {
			t.Errorf("Accept %q: Content-Type %q, time %v", accept, hdr.Get("Content-Type"), p.Time)
		}
		if _, ok := p.Time["1.4.0"]; ok {
			t.Error("time still names the removed version")
		}
	}
	if m.reg.Count("/left-pad") != 1 {
		t.Errorf("the upstream saw %d packument requests, want 1 (the second is from the cache)", m.reg.Count("/left-pad"))
	}
	if f := m.Filtered(); len(f) != 1 || len(f[0].Removed) != 1 || f[0].Removed[0].Outcome != fetch.Cooldown ||
		f[0].Removed[0].Rule != "cooldown.min_age" {
		t.Errorf("filtered = %+v, want one record removing 1.4.0 for the cooldown", m.Filtered())
	}
	// Scoped names, both spellings.
	for _, p := range []string{"/npm/@scope/util", "/npm/@scope%2futil"} {
		if code, b, _ := m.get(t, p, ""); code != 200 || !bytes.Contains(b, []byte(`/npm/@scope%2Futil/-/util-0.1.0.tgz`)) {
			t.Errorf("GET %s = %d %s", p, code, b)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestTarball: a verified tarball is served and recorded; the second
// request is a cache hit; a version refused by the policy is a 403 naming
// the rule; scripts and provenance are recorded.
func TestTarball(t *testing.T) {
	m := newMirror(t, npmtest.Start(t, fixture()...), "blocklist:\n  - purl: pkg:npm/left-pad@1.2.0\n    reason: a test\n")
	want := npmtest.Tarball("left-pad", npmtest.Version{Version: "1.3.0"})
	for i, hit := range []bool{false, true} {
		code, b, _ := m.get(t, "/npm/left-pad/-/left-pad-1.3.0.tgz", "")
		if code != 200 || !bytes.Equal(b, want) {
			t.Fatalf("GET tarball #%d = %d (%d bytes), want 200 and the tarball", i, code, len(b))
		}
		r := m.last()
		if r.Outcome != fetch.Served || !r.Verified || r.CacheHit != hit || r.Version != "1.3.0" || r.Bytes != int64(len(want)) ||
			r.Hash != npmtest.Integrity(want) || !strings.HasSuffix(r.URL, "/left-pad/-/left-pad-1.3.0.tgz") {
			t.Errorf("record #%d = %+v", i, *r)
		}
		if r.Provenance == nil || *r.Provenance || !r.ProvenanceLost {
			t.Errorf("record #%d provenance %v lost %v, want false, lost (1.2.0 had attestations)", i, r.Provenance, r.ProvenanceLost)
		}
	}
	if n := m.reg.Count(npmtest.TarballPath("left-pad", "1.3.0")); n != 1 {
		t.Errorf("upstream tarball requests = %d, want 1", n)
	}
	code, b, _ := m.get(t, "/npm/left-pad/-/left-pad-1.2.0.tgz", "")
	if r := m.last(); code != 403 || !strings.Contains(string(b), "blocklist") || r.Outcome != fetch.Blocked || r.Rule == "" {
		t.Errorf("blocked version = %d %s, record %+v", code, b, *r)
	}
	code, b, _ = m.get(t, "/npm/left-pad/-/left-pad-1.4.0.tgz", "")
	if r := m.last(); code != 403 || r.Outcome != fetch.Cooldown {
		t.Errorf("version in the cooldown = %d %s, record %+v", code, b, *r)
	}
	if code, _, _ := m.get(t, "/npm/@scope/util/-/util-0.1.0.tgz", ""); code != 200 {
		t.Fatalf("scoped tarball = %d", code)
	}
	if r := m.last(); len(r.InstallScripts) != 1 || r.InstallScripts[0] != "postinstall" {
		t.Errorf("install scripts = %v, want [postinstall]", r.InstallScripts)
	}
}

// TestTarballBundles: the record of a tarball served names the packages
// its version's metadata says it bundles: bundleDependencies' list, or
// bundledDependencies: true for all of its dependencies; none for a
// version that bundles nothing.
func TestTarballBundles(t *testing.T) {
	inner := npmtest.Version{Version: "1.0.0"}
	m := newMirror(t, npmtest.Start(t,
		npmtest.Package{Name: "listed", Versions: []npmtest.Version{{Version: "1.0.0", Published: old,
			Deps: map[string]string{"other": "^1.0.0"}, Bundled: map[string]npmtest.Version{"inner": inner, "@s/x": inner}}}},
		npmtest.Package{Name: "all", Versions: []npmtest.Version{{Version: "1.0.0", Published: old, BundleAll: true,
			Deps: map[string]string{"other": "^1.0.0"}, Bundled: map[string]npmtest.Version{"inner": inner}}}},
		npmtest.Package{Name: "none", Versions: []npmtest.Version{{Version: "1.0.0", Published: old, Deps: map[string]string{"other": "^1.0.0"}}}},
	), "")
	for _, tt := range []struct {
		name string
		want []string
	}{
		{"listed", []string{"@s/x", "inner"}},
		{"all", []string{"inner", "other"}},
		{"none", nil},
	} {
		if code, b, _ := m.get(t, "/npm/"+tt.name+"/-/"+tt.name+"-1.0.0.tgz", ""); code != 200 {
			t.Fatalf("GET %s tarball = %d %s", tt.name, code, b)
		}
		if r := m.last(); r.Outcome != fetch.Served || !r.Verified || !slices.Equal(r.Bundles, tt.want) {
			t.Errorf("%s: record outcome %s verified %v bundles %q, want served, verified, %q", tt.name, r.Outcome, r.Verified, r.Bundles, tt.want)
		}
	}
}

// TestProvenanceLoss: with provenance_loss: block, a version without the
// attestations an earlier version had is removed and refused (the
// malicious nx releases of August 2025 stood out that way).
func TestProvenanceLoss(t *testing.T) {
	m := newMirror(t, npmtest.Start(t, fixture()...), "provenance_loss: block\n")
	_, b, _ := m.get(t, "/npm/left-pad", "")
	if bytes.Contains(b, []byte(`"1.3.0"`)) || !bytes.Contains(b, []byte(`"1.2.0"`)) {
		t.Errorf("packument still lists 1.3.0, which lost 1.2.0's provenance:\n%s", b)
	}
	code, body, _ := m.get(t, "/npm/left-pad/-/left-pad-1.3.0.tgz", "")
	if r := m.last(); code != 403 || r.Outcome != fetch.Blocked || r.Rule != "provenance_loss" || !r.ProvenanceLost {
		t.Errorf("tarball that lost provenance = %d %s, record %+v", code, body, *r)
	}
}

// TestTamperedOrBadSignatureTarballRefused: a tarball that does not match its integrity, or whose
// signature is bad, is never served.
func TestTamperedOrBadSignatureTarballRefused(t *testing.T) {
	reg := npmtest.Start(t, fixture()...)
	reg.Tamper("left-pad", "1.3.0")
	reg.BadSignature("left-pad", "1.2.0")
	m := newMirror(t, reg, "")
	code, b, _ := m.get(t, "/npm/left-pad/-/left-pad-1.3.0.tgz", "")
	if r := m.last(); code != 403 || r.Outcome != fetch.HashMismatch || r.Verified || bytes.Contains(b, []byte("package.json")) {
		t.Errorf("tampered tarball = %d %q, record %+v", code, b, *r)
	}
	// And it is not in the cache afterwards.
	if st := m.h.env.Cache.Stats(); st.Blobs != 0 {
		t.Errorf("the cache holds %d blobs after a mismatch", st.Blobs)
	}
	code, b, _ = m.get(t, "/npm/left-pad/-/left-pad-1.2.0.tgz", "")
	if r := m.last(); code != 403 || r.Outcome != fetch.SignatureInvalid {
		t.Errorf("bad signature = %d %s, record %+v", code, b, *r)
	}
	if n := reg.Count(npmtest.TarballPath("left-pad", "1.2.0")); n != 0 {
		t.Errorf("the tarball with a bad signature was fetched %d times, want 0 (refused before)", n)
	}
}

// TestSignatures: once the registry's keys are known, an unsigned version
// is refused; an upstream that publishes no keys at all is served on its
// digests, and the record says the signature was unavailable.
func TestSignatures(t *testing.T) {
	reg := npmtest.Start(t, fixture()...)
	reg.Unsigned("left-pad", "1.3.0")
	m := newMirror(t, reg, "")
	code, b, _ := m.get(t, "/npm/left-pad/-/left-pad-1.3.0.tgz", "")
	if r := m.last(); code != 403 || r.Outcome != fetch.SignatureInvalid || !strings.Contains(r.Reason, "no registry signature") {
		t.Errorf("unsigned version from a registry with keys = %d %s, record %+v", code, b, *r)
	}
	if code, _, _ := m.get(t, "/npm/left-pad/-/left-pad-1.2.0.tgz", ""); code != 200 || m.last().Signature != fetch.SignatureVerified {
		t.Errorf("signed version = %d, record %+v", code, m.last())
	}
	none := npmtest.Start(t, fixture()...)
	none.NoKeys()
	m = newMirror(t, none, "")
	code, _, _ = m.get(t, "/npm/left-pad/-/left-pad-1.3.0.tgz", "")
	if r := m.last(); code != 200 || !r.Verified || r.Signature != fetch.SignatureUnavailable {
		t.Errorf("upstream without keys = %d, record %+v, want served on its digests with the signature unavailable", code, *r)
	}
	m.get(t, "/npm/left-pad/-/left-pad-1.2.0.tgz", "")
	if n := none.Count("/-/npm/v1/keys"); n != 1 {
		t.Errorf("the keys were asked for %d times, want once per TTL", n)
	}
}

// TestStale: with the upstream gone, the packument and the tarball come
// from the cache.
func TestStale(t *testing.T) {
	reg := npmtest.Start(t, fixture()...)
	m := newMirror(t, reg, "")
	m.h.env.MetaTTL = 0 // every request goes upstream first
	if code, _, _ := m.get(t, "/npm/left-pad/-/left-pad-1.3.0.tgz", ""); code != 200 {
		t.Fatalf("warm = %d", code)
	}
	reg.Close()
	code, b, hdr := m.get(t, "/npm/left-pad", "")
	if code != 200 || !strings.Contains(hdr.Get("Warning"), "stale") {
		t.Errorf("packument with the upstream down = %d %s (Warning %q)", code, b, hdr.Get("Warning"))
	}
	if code, _, _ := m.get(t, "/npm/left-pad/-/left-pad-1.3.0.tgz", ""); code != 200 || !m.last().CacheHit {
		t.Errorf("tarball with the upstream down = %d, record %+v", code, m.last())
	}
	if code, _, _ := m.get(t, "/npm/other", ""); code != 502 {
		t.Errorf("uncached package with the upstream down = %d, want 502", code)
	}
}

// TestCoalesce: concurrent requests for one tarball fetch it once.
func TestCoalesce(t *testing.T) {
	reg := npmtest.Start(t, fixture()...)
	m := newMirror(t, reg, "")
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _, _ := m.get(t, "/npm/left-pad/-/left-pad-1.3.0.tgz", ""); code != 200 {
				t.Errorf("GET = %d", code)
			}
		}()
	}
	wg.Wait()
	if n := reg.Count(npmtest.TarballPath("left-pad", "1.3.0")); n != 1 {
		t.Errorf("upstream tarball requests = %d, want 1", n)
	}
	if n := reg.Count("/left-pad"); n != 1 {
		t.Errorf("upstream packument requests = %d, want 1", n)
	}
}

// TestBadPaths: bad names and traversal are refused before any upstream
// request.
func TestBadPaths(t *testing.T) {
	reg := npmtest.Start(t, fixture()...)
	m := newMirror(t, reg, "")
	for _, p := range []string{"/npm/..%2f..%2fetc%2fpasswd", "/npm/Left-Pad", "/npm/.hidden", "/npm/left-pad/-/..%2fx.tgz",
		"/npm/left-pad/-/x.zip", "/npm/@scope", "/npm/" + strings.Repeat("a", 215), "/npm/a%00b", "/npm/-/v1/search"} {
		code, _, _ := m.get(t, p, "")
		if code != 400 && code != 404 {
			t.Errorf("GET %s = %d, want 400 or 404", p, code)
		}
	}
	for p, n := range map[string]int{"/Left-Pad": 0, "/.hidden": 0} {
		if reg.Count(p) != n {
			t.Errorf("upstream saw %s", p)
		}
	}
}

// TestKeys: the keys endpoint serves the registry's keys.
func TestKeys(t *testing.T) {
	m := newMirror(t, npmtest.Start(t, fixture()...), "")
	code, b, _ := m.get(t, "/npm/-/npm/v1/keys", "")
	var ks keyList
	if code != 200 || json.Unmarshal(b, &ks) != nil || len(ks.Keys) != 1 || ks.Keys[0].KeyID != "SHA256:fixture" {
		t.Errorf("keys = %d %s", code, b)
	}
}

// FuzzParsePackument: any packument that parses (listing's
// FuzzParsePackument fuzzes the format) is ordered, and its dist-tags are
// repaired and its provenance compared without panicking.
func FuzzParsePackument(f *testing.F) {
	f.Add([]byte(`{"name":"x","versions":{"1.0.0":{"dist":{"tarball":"http://h/x/-/x-1.0.0.tgz","integrity":"sha512-AA=="}}},"dist-tags":{"latest":"1.0.0"},"time":{"1.0.0":"2020-01-01T00:00:00Z"}}`))
	f.Add([]byte(`{"name":"x","versions":{"1":{}}}`))
	f.Add([]byte(`{"name":"x","versions":{"1.0.0":{"dist":{"attestations":{}}},"2.0.0-rc.1":{},"0.1.0":{}},"dist-tags":{"latest":"2.0.0-rc.1","next":"9"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePackument("x", b, time.Now())
		if err != nil {
			return
		}
		if !slices.IsSortedFunc(p.order, compare) {
			t.Errorf("order %q is not ascending", p.order)
		}
		removed := map[string]fetch.Removal{}
		for v := range p.Versions {
			removed[v] = fetch.Removal{}
			break
		}
		for tag, v := range p.repairTags(removed) {
			if _, gone := removed[v]; gone {
				t.Errorf("tag %s names %q, which is removed", tag, v)
			}
		}
		for v := range p.Versions {
			p.lostProvenance(v)
		}
	})
}

// TestForeignTarball: a packument whose tarball URL leaves the approved
// registry (another host:port; on loopback, so that a regression sends
// nothing off the machine) is refused as unknown_source before anything is
// fetched: a poisoned upstream cannot make the mirror request an
// arbitrary URL, such as a metadata service's.
func TestForeignTarball(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/evil" {
			t.Errorf("the mirror asked the upstream for %s", r.URL.Path)
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"name":"evil","dist-tags":{"latest":"1.0.0"},"time":{"1.0.0":"2020-01-01T00:00:00Z"},
  "versions":{"1.0.0":{"name":"evil","version":"1.0.0","dist":{"tarball":"http://127.0.0.1:9/latest/meta-data/evil-1.0.0.tgz","integrity":"sha512-AAAA"}}}}`)
	}))
	defer up.Close()
	env := fetchtest.New(t, "sources:\n  registries:\n    npm: ["+up.URL+"/]\n")
	u, _ := url.Parse(up.URL)
	h := New(env.Env, u, "/npm/")
	srv := fetchtest.Serve(t, "/npm/", h.Serve)
	code, b, _ := fetchtest.Get(t, srv.URL+"/npm/evil/-/evil-1.0.0.tgz")
	if r := env.Last(); code != 403 || r.Outcome != fetch.UnknownSource {
		t.Errorf("tarball off the registry = %d %s, record %+v, want 403 unknown_source", code, b, r)
	}
	if _, b, _ := fetchtest.Get(t, srv.URL+"/npm/evil"); bytes.Contains(b, []byte(`"1.0.0":{`)) {
		t.Errorf("the packument still offers the version whose tarball is off the registry:\n%s", b)
	}
}

// publicTransport sends the requests for the public registry to the fixture
// registry at fixture, and everything else as it is.
type publicTransport struct{ fixture *url.URL }

func (p publicTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host == "registry.npmjs.org" {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host, r.Host = p.fixture.Scheme, p.fixture.Host, p.fixture.Host
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestPackumentPortableTarballs: on a mirror of the public registry, npm
// (User-Agent npm/…) is served tarball URLs on registry.npmjs.org, at the
// registry's own paths (scoped names with their slash), which npm fetches
// through the mirror and writes into lockfiles; other clients get the
// mirror's URLs, and the mirror serves both paths.
func TestPackumentPortableTarballs(t *testing.T) {
	reg := npmtest.Start(t, fixture()...)
	env := fetchtest.New(t, "sources:\n  registries:\n    npm: ["+reg.URL+"/, "+PublicRegistry+"]\n")
	fu, _ := url.Parse(reg.URL)
	env.Upstream.HTTP = &http.Client{Transport: publicTransport{fu}}
	pub, _ := url.Parse(PublicRegistry)
	h := New(env.Env, pub, "/npm/")
	srv := fetchtest.Serve(t, "/npm/", h.Serve)
	tests := []struct {
		name, agent, pkg, version, want string
	}{
		{"npm", "npm/11.19.1 node/v22.0.0 linux x64 workspaces/false", "left-pad", "1.3.0",
			"https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz"},
		{"npm scoped", "npm/10.0.0 node/v20.0.0 linux x64", "@scope/util", "0.1.0",
			"https://registry.npmjs.org/@scope/util/-/util-0.1.0.tgz"},
		{"yarn", "yarn/1.22.22 npm/? node/v22.0.0 linux x64", "left-pad", "1.3.0",
			srv.URL + "/npm/left-pad/-/left-pad-1.3.0.tgz"},
		{"no agent", "", "@scope/util", "0.1.0", srv.URL + "/npm/@scope%2Futil/-/util-0.1.0.tgz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, accept := range []string{"application/json", abbreviated} {
				code, b, hdr := fetchtest.Get(t, srv.URL+"/npm/"+tt.pkg, "Accept", accept, "User-Agent", tt.agent)
				if code != 200 {
					t.Fatalf("GET %s = %d %s", tt.pkg, code, b)
				}
				var p struct {
					Versions map[string]struct {
						Dist struct{ Tarball string } `json:"dist"`
					} `json:"versions"`
				}
				if err := json.Unmarshal(b, &p); err != nil {
					t.Fatal(err)
				}
				if got := p.Versions[tt.version].Dist.Tarball; got != tt.want {
					t.Errorf("%s (%s): tarball = %q, want %q", tt.agent, accept, got, tt.want)
				}
				if !strings.Contains(hdr.Get("Vary"), "User-Agent") {
					t.Errorf("Vary = %q, want User-Agent among it", hdr.Get("Vary"))
				}
			}
		})
	}
	// What npm fetches for the first two: the registry's path beneath the
	// mirror's prefix.
	for _, p := range []string{"/npm/left-pad/-/left-pad-1.3.0.tgz", "/npm/@scope/util/-/util-0.1.0.tgz"} {
		if code, b, _ := fetchtest.Get(t, srv.URL+p); code != 200 {
			t.Errorf("GET %s = %d %s", p, code, b)
		}
	}
}

// TestVersionDocument: "<name>/<version or tag>" (as corepack asks for
// "pnpm/latest") is the version's manifest from the filtered packument:
// latest is the repaired tag, its tarball points at the mirror and its
// signatures stay; a version the policy removed, or none, is not found.
func TestVersionDocument(t *testing.T) {
	m := newMirror(t, npmtest.Start(t, fixture()...), "")
	var doc struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Dist    struct {
			Tarball    string              `json:"tarball"`
			Integrity  string              `json:"integrity"`
			Signatures []listing.Signature `json:"signatures"`
		} `json:"dist"`
	}
	for _, p := range []string{"/npm/left-pad/latest", "/npm/left-pad/1.3.0"} {
		code, b, _ := m.get(t, p, "")
		if code != 200 || json.Unmarshal(b, &doc) != nil {
			t.Fatalf("GET %s = %d %s", p, code, b)
		}
		if doc.Version != "1.3.0" || doc.Dist.Tarball != m.URL+"/npm/left-pad/-/left-pad-1.3.0.tgz" ||
			doc.Dist.Integrity == "" || len(doc.Dist.Signatures) == 0 {
			t.Errorf("GET %s = %s, want 1.3.0 with the mirror's tarball URL, its integrity and signatures", p, b)
		}
	}
	if code, b, _ := m.get(t, "/npm/@scope%2futil/0.1.0", ""); code != 200 || !bytes.Contains(b, []byte(`/npm/@scope%2Futil/-/util-0.1.0.tgz`)) {
		t.Errorf("GET @scope/util/0.1.0 = %d %s", code, b)
	}
	for p, want := range map[string]string{"/npm/left-pad/1.4.0": fetch.Cooldown, "/npm/left-pad/9.9.9": "not_found", "/npm/left-pad/next": "not_found"} {
		if code, b, _ := m.get(t, p, ""); code != 404 || !bytes.Contains(b, []byte(want)) {
			t.Errorf("GET %s = %d %s, want 404 %s", p, code, b, want)
		}
	}
}

func FuzzVersionPath(f *testing.F) {
	for _, s := range []string{"pnpm/latest", "@scope/pkg/1.0.0", "@scope%2fpkg/1.0.0", "left-pad/-/left-pad-1.0.0.tgz", "../x/y", "a/", "@s/p"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		name, ver, ok := versionPath(p)
		if !ok {
			return
		}
		if CheckName(name) != nil || ver == "" || strings.Contains(ver, "/") {
			t.Errorf("versionPath(%q) = %q, %q", p, name, ver)
		}
	})
}
