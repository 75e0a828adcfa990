package crates

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/crates/cratestest"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch/fetchtest"
)

// mirror is a Handler over a fixture index, served on loopback.
type mirror struct {
	*fetchtest.Env
	h   *Handler
	reg *cratestest.Registry
	url string
}

func newMirror(t *testing.T, reg *cratestest.Registry, extraPolicy string) *mirror {
	t.Helper()
	env := fetchtest.New(t, "sources:\n  registries:\n    cargo: ["+reg.URL+"/]\ncooldown:\n  min_age: 48h\n  action: block\n"+extraPolicy)
	u, _ := url.Parse(reg.URL)
	m := &mirror{Env: env, h: New(env.Env, u, "/crates/"), reg: reg}
	m.url = fetchtest.Serve(t, "/crates/", m.h.Serve).URL
	return m
}

func (m *mirror) get(t *testing.T, path string, header ...string) (int, []byte, http.Header) {
	t.Helper()
	return fetchtest.Get(t, m.url+path, header...)
}

func (m *mirror) last() fetch.Record { return m.Last() }

var old = time.Now().Add(-30 * 24 * time.Hour)

// fixture has crates of every index path length, a version inside the
// cooldown, a yanked one and one without pubtime.
func fixture() []cratestest.Crate {
	return []cratestest.Crate{
		{Name: "leaf", Versions: []cratestest.Version{{Version: "1.0.0", Published: old}, {Version: "1.0.1", Published: old, Yanked: true},
			{Version: "1.1.0", Published: time.Now().Add(-time.Hour)}}},
		{Name: "x", Versions: []cratestest.Version{{Version: "0.1.0", Published: old}}},
		{Name: "xy", Versions: []cratestest.Version{{Version: "0.1.0", Published: old}}},
		{Name: "xyz", Versions: []cratestest.Version{{Version: "0.1.0", Published: old, Deps: []cratestest.Dep{{Name: "leaf", Req: "^1"}}}}},
		{Name: "Mixed_Case", Versions: []cratestest.Version{{Version: "2.0.0", NoPubtime: true}}},
	}
}

// lines reads an index file's versions.
func lines(t *testing.T, b []byte) []string {
	t.Helper()
	var vs []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var r struct{ Vers string }
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("served index line %q: %v", l, err)
		}
		vs = append(vs, r.Vers)
	}
	return vs
}

// TestConfig: config.json's dl points at the mirror, and it has no api.
func TestConfig(t *testing.T) {
	m := newMirror(t, cratestest.Start(t, fixture()...), "")
	code, b, _ := m.get(t, "/crates/index/config.json")
	var c map[string]any
	if code != 200 || json.Unmarshal(b, &c) != nil {
		t.Fatalf("GET config.json = %d %s", code, b)
	}
	want := map[string]any{"dl": m.url + "/crates/dl/{crate}/{version}/download"}
	if fmt.Sprint(c) != fmt.Sprint(want) {
		t.Errorf("config.json = %v, want %v", c, want)
	}
}

// TestIndex: index files are served at their paths with the version inside
// the cooldown dropped (recorded once per session), the yanked version
// kept, from the cache the second time, and revalidated by ETag.
func TestIndex(t *testing.T) {
	m := newMirror(t, cratestest.Start(t, fixture()...), "")
	for _, tc := range []struct{ path, want string }{
		{"/crates/index/le/af/leaf", "[1.0.0 1.0.1]"},
		{"/crates/index/1/x", "[0.1.0]"},
		{"/crates/index/2/xy", "[0.1.0]"},
		{"/crates/index/3/x/xyz", "[0.1.0]"},
		{"/crates/index/mi/xe/mixed_case", "[2.0.0]"},
	} {
		code, b, _ := m.get(t, tc.path)
		if code != 200 {
			t.Errorf("GET %s = %d %s", tc.path, code, b)
			continue
		}
		if got := fmt.Sprint(lines(t, b)); got != tc.want {
			t.Errorf("GET %s versions = %s, want %s", tc.path, got, tc.want)
		}
	}
	code, b, hdr := m.get(t, "/crates/index/le/af/leaf")
	if code != 200 || hdr.Get("ETag") == "" {
		t.Fatalf("GET leaf again = %d, ETag %q", code, hdr.Get("ETag"))
	}
	if code, _, _ := m.get(t, "/crates/index/le/af/leaf", "If-None-Match", hdr.Get("ETag")); code != http.StatusNotModified {
		t.Errorf("GET with If-None-Match = %d, want 304", code)
	}
	if !strings.Contains(string(b), `"yanked":true`) {
		t.Errorf("the yanked version's line changed or went: %s", b)
	}
	if n := m.reg.Count(cratestest.IndexPath("leaf")); n != 1 {
		t.Errorf("the upstream saw %d requests for leaf's index file, want 1 (then the cache)", n)
	}
	if f := m.Filtered(); len(f) != 1 || len(f[0].Removed) != 1 || f[0].Removed[0].Version != "1.1.0" ||
		f[0].Removed[0].Outcome != fetch.Cooldown || f[0].Removed[0].Rule != "cooldown.min_age" {
		t.Errorf("filtered = %+v, want one record removing 1.1.0 for cooldown.min_age", f)
	}
}

// TestCrate: a verified .crate is served and recorded, a cache hit the
// second time; refused versions are a 403 naming the rule; both forms of
// the upstream's dl template work.
func TestCrate(t *testing.T) {
	for _, dl := range []string{cratestest.DefaultDL, "/api/v1/crates"} {
		t.Run(dl, func(t *testing.T) {
			reg := cratestest.Start(t, fixture()...)
			reg.SetDL(dl)
			m := newMirror(t, reg, "blocklist:\n  - purl: pkg:cargo/x@0.1.0\n    reason: a test\n")
			want := cratestest.CrateFile("leaf", cratestest.Version{Version: "1.0.0"})
			for i, hit := range []bool{false, true} {
				code, b, _ := m.get(t, "/crates/dl/leaf/1.0.0/download")
				if code != 200 || string(b) != string(want) {
					t.Fatalf("GET crate #%d = %d (%d bytes) %.200s, want 200 and the crate", i, code, len(b), b)
				}
				r := m.last()
				if r.Outcome != fetch.Served || !r.Verified || r.CacheHit != hit || r.Name != "leaf" || r.Version != "1.0.0" ||
					r.Bytes != int64(len(want)) || r.Hash != "sha256:"+cratestest.Cksum(want) || !strings.HasPrefix(r.URL, reg.URL+"/") {
					t.Errorf("record #%d = %+v", i, r)
				}
			}
			code, b, _ := m.get(t, "/crates/dl/x/0.1.0/download")
			if r := m.last(); code != 403 || !strings.Contains(string(b), "blocklist") || r.Outcome != fetch.Blocked || r.Rule == "" {
				t.Errorf("blocked version = %d %s, record %+v", code, b, r)
			}
			code, b, _ = m.get(t, "/crates/dl/leaf/1.1.0/download")
			if r := m.last(); code != 403 || !strings.Contains(string(b), "cooldown.min_age") || r.Outcome != fetch.Cooldown {
				t.Errorf("version in the cooldown = %d %s, record %+v", code, b, r)
			}
			if code, _, _ := m.get(t, "/crates/dl/Mixed_Case/2.0.0/download"); code != 200 || m.last().Name != "Mixed_Case" {
				t.Errorf("crate with a mixed-case name = %d, record %+v", code, m.last())
			}
			if code, _, _ := m.get(t, "/crates/dl/leaf/9.9.9/download"); code != 404 || m.last().Outcome != fetch.NotFound {
				t.Errorf("unknown version = %d, record %+v", code, m.last())
			}
		})
	}
}

// TestTampered: a .crate that does not match its cksum is never served
// and not cached.
func TestTampered(t *testing.T) {
	reg := cratestest.Start(t, fixture()...)
	reg.Tamper("leaf", "1.0.0")
	m := newMirror(t, reg, "")
	for range 2 {
		code, b, _ := m.get(t, "/crates/dl/leaf/1.0.0/download")
		if r := m.last(); code != 403 || r.Outcome != fetch.HashMismatch || r.Verified || strings.Contains(string(b), "Cargo.toml") {
			t.Errorf("tampered crate = %d %q, record %+v", code, b, r)
		}
	}
	if st := m.h.env.Cache.Stats(); st.Blobs != 0 {
		t.Errorf("the cache holds %d blobs after a mismatch", st.Blobs)
	}
	if n := reg.Count(cratestest.CratePath("leaf", "1.0.0")); n != 2 {
		t.Errorf("the tampered crate was fetched %d times, want 2 (nothing cached)", n)
	}
}

// TestMalformed: lines that do not parse are dropped from what is served;
// a download of a version that may be one of them is refused; a file of
// which no line parses is an upstream error.
func TestMalformed(t *testing.T) {
	reg := cratestest.Start(t, fixture()...)
	good := cratestest.Line("leaf", cratestest.Version{Version: "3.0.0", Published: old}, []byte("x"))
	reg.AddLine("leaf", `{"name":"leaf","vers":"2.0.0","cksum":"nothex","pubtime":"2020-01-01T00:00:00Z"}`)
	reg.AddLine("leaf", `not json`)
	reg.AddLine("leaf", strings.Replace(good, `"leaf"`, `"other"`, 1))
	reg.AddLine("x", strings.Replace(cratestest.Line("x", cratestest.Version{Version: "0.2.0"}, nil), `"x"`, `"y"`, 1))
	reg.Add(cratestest.Crate{Name: "junk"})
	reg.AddLine("junk", `<html>`)
	m := newMirror(t, reg, "")
	code, b, _ := m.get(t, "/crates/index/le/af/leaf")
	if got := fmt.Sprint(lines(t, b)); code != 200 || got != "[1.0.0 1.0.1]" {
		t.Errorf("index with bad lines = %d %s, want the good lines", code, got)
	}
	if code, b, _ := m.get(t, "/crates/dl/leaf/2.0.0/download"); code != 502 || !strings.Contains(string(b), "do not parse") {
		t.Errorf("download of a version whose line is malformed = %d %s, want 502", code, b)
	}
	reg.AddLine("xy", `{"name":"xy","vers":"0.1.0+other","cksum":"`+strings.Repeat("0", 64)+`"}`) // 0.1.0 twice
	if code, b, _ := m.get(t, "/crates/index/1/x"); code != 200 || fmt.Sprint(lines(t, b)) != "[0.1.0]" {
		t.Errorf("index with another crate's line = %d %q, want 200 and x's line", code, b)
	}
	if code, b, _ := m.get(t, "/crates/dl/xy/0.1.0/download"); code != 502 || !strings.Contains(string(b), "no line") {
		t.Errorf("download of a version listed twice = %d %s, want 502", code, b)
	}
	for range 2 {
		if code, b, _ := m.get(t, "/crates/index/ju/nk/junk"); code != 502 || !strings.Contains(string(b), "no line") {
			t.Errorf("index of which no line parses = %d %s, want 502", code, b)
		}
	}
	if n := reg.Count(cratestest.IndexPath("junk")); n != 2 {
		t.Errorf("the unparsable index file was fetched %d times, want 2 (not cached)", n)
	}
}
