package crates

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sandtrail/sandtrail/registry-mirror/crates/cratestest"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
)

func TestIndexName(t *testing.T) {
	for _, tc := range []struct {
		name, path, want string
		status           int
	}{
		{name: "one", path: "1/a", want: "a"},
		{name: "two", path: "2/ab", want: "ab"},
		{name: "three", path: "3/a/abc", want: "abc"},
		{name: "four", path: "ab/cd/abcd", want: "abcd"},
		{name: "long", path: "se/rd/serde_json", want: "serde_json"},
		{name: "dash", path: "a-/b_/a-b_c", want: "a-b_c"},
		{name: "wrong length dir", path: "1/ab", status: 404},
		{name: "wrong first char", path: "3/b/abc", status: 404},
		{name: "wrong prefix", path: "se/xx/serde", status: 404},
		{name: "no dirs", path: "serde", status: 404},
		{name: "upper case", path: "Se/rd/Serde", status: 400},
		{name: "traversal", path: "../../etc/passwd", status: 400},
		{name: "dot name", path: "ab/.c/ab.cd", status: 400},
		{name: "leading dash", path: "-a/bc/-abc", status: 400},
		{name: "empty", path: "", status: 400},
		{name: "nul", path: "ab/c\x00/abc\x00", status: 400},
		{name: "too long", path: "aa/aa/" + strings.Repeat("a", 65), status: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := indexName(tc.path)
			if status(err) != tc.status || got != tc.want {
				t.Errorf("indexName(%q) = %q, %v; want %q, status %d", tc.path, got, err, tc.want, tc.status)
			}
		})
	}
}

// status is the HTTP status of err; 0 for none.
func status(err error) int {
	if e := (*fetch.Error)(nil); errors.As(err, &e) {
		return e.Status
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestBadPaths: bad names, versions and traversal are refused before any
// upstream request.
func TestBadPaths(t *testing.T) {
	reg := cratestest.Start(t, fixture()...)
	m := newMirror(t, reg, "")
	for _, p := range []string{"/crates/index/..%2f..%2fetc%2fpasswd", "/crates/index/../../etc/passwd", "/crates/index/Le/af/Leaf",
		"/crates/index/le/af/le", "/crates/index/", "/crates/index/le/af/leaf%00", "/crates/dl/leaf/1.0.0/../../x",
		"/crates/dl/leaf/..%2f..%2fx/download", "/crates/dl/leaf/1.0/download", "/crates/dl/leaf/v1.0.0/download",
		"/crates/dl/" + strings.Repeat("a", 65) + "/1.0.0/download", "/crates/dl/a%00b/1.0.0/download",
		"/crates/dl/.leaf/1.0.0/download", "/crates/other"} {
		if code, b, _ := m.get(t, p); code != 400 && code != 404 {
			t.Errorf("GET %s = %d %s, want 400 or 404", p, code, b)
		}
	}
	if n := reg.Total(); n != 0 {
		t.Errorf("the upstream saw %d requests, want none", n)
	}
}

// TestStale: with the upstream down, config.json, the index files and the
// cached crates come from the cache, and the records say so.
func TestStale(t *testing.T) {
	reg := cratestest.Start(t, fixture()...)
	m := newMirror(t, reg, "")
	m.h.env.MetaTTL = 0 // every request goes upstream first
	if code, _, _ := m.get(t, "/crates/dl/leaf/1.0.0/download"); code != 200 {
		t.Fatalf("warm = %d", code)
	}
	reg.Down(true)
	if code, b, _ := m.get(t, "/crates/index/config.json"); code != 200 {
		t.Errorf("config.json with the upstream down = %d %s", code, b)
	}
	code, b, hdr := m.get(t, "/crates/index/le/af/leaf")
	if code != 200 || !strings.Contains(hdr.Get("Warning"), "stale") || len(lines(t, b)) != 2 {
		t.Errorf("index with the upstream down = %d %s (Warning %q)", code, b, hdr.Get("Warning"))
	}
	if code, _, _ := m.get(t, "/crates/dl/leaf/1.0.0/download"); code != 200 || !m.last().CacheHit || !m.last().MetadataStale {
		t.Errorf("crate with the upstream down = %d, record %+v", code, m.last())
	}
	if code, _, _ := m.get(t, "/crates/dl/x/0.1.0/download"); code != 502 || m.last().Outcome != fetch.UpstreamError {
		t.Errorf("uncached crate with the upstream down = %d, record %+v, want 502", code, m.last())
	}
}

// TestCoalesce: concurrent requests for one crate fetch it, its index file
// and config.json once.
func TestCoalesce(t *testing.T) {
	reg := cratestest.Start(t, fixture()...)
	m := newMirror(t, reg, "")
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _, _ := m.get(t, "/crates/dl/leaf/1.0.0/download"); code != http.StatusOK {
				t.Errorf("GET = %d", code)
			}
		}()
	}
	wg.Wait()
	for _, p := range []string{cratestest.CratePath("leaf", "1.0.0"), cratestest.IndexPath("leaf"), "/config.json"} {
		if n := reg.Count(p); n != 1 {
			t.Errorf("upstream requests for %s = %d, want 1", p, n)
		}
	}
	if n := len(m.Records()); n != 30 {
		t.Errorf("%d records, want one per request (30)", n)
	}
}
