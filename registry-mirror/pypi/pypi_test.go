package pypi

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch/fetchtest"
	"github.com/sandtrail/sandtrail/registry-mirror/pypi/pypitest"
)

// mirror is a Handler over a fixture index, served on loopback.
type mirror struct {
	*httptest.Server
	*fetchtest.Env
	h  *Handler
	ix *pypitest.Index
}

// newMirror serves ix beneath /pypi/, with a policy that approves its
// index and files hosts, a 48h cooldown, and extraPolicy.
func newMirror(t *testing.T, ix *pypitest.Index, extraPolicy string) *mirror {
	t.Helper()
	env := fetchtest.New(t, "sources:\n  registries:\n    pypi: ["+ix.SimpleURL()+", "+ix.Files.URL+
		"/packages/]\ncooldown:\n  min_age: 48h\n  action: block\n"+extraPolicy)
	m := &mirror{ix: ix, Env: env}
	var err error
	u, _ := url.Parse(ix.SimpleURL())
	if m.h, err = New(env.Env, u, "/pypi/"); err != nil {
		t.Fatal(err)
	}
	// The response is buffered until the handler returns, so that its
	// record is in when the client has the response.
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := httptest.NewRecorder()
		if err := m.h.Serve(buf, r, strings.TrimPrefix(r.URL.EscapedPath(), "/pypi/")); err != nil {
			fetch.Write(buf, err)
		}
		maps.Copy(w.Header(), buf.Header())
		w.WriteHeader(buf.Code)
		w.Write(buf.Body.Bytes())
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *mirror) get(t *testing.T, path, accept string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", m.URL+path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// pipAccept is what pip 23 sends for a project page.
const pipAccept = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01"

var old = time.Now().Add(-30 * 24 * time.Hour)

func fixture() []pypitest.Project {
	return []pypitest.Project{
		{Name: "Tiny_Pkg", Versions: []pypitest.Version{
			{Version: "1.0", Uploaded: old, Sdist: true},
			{Version: "1.1", Uploaded: old, Yanked: true, YankedReason: "broken", RequiresPython: ">=3.8"},
			{Version: "2.0", Uploaded: time.Now().Add(-time.Hour)},
		}},
	}
}

const wheel10 = "tiny_pkg-1.0-py3-none-any.whl"

// TestNegotiate: the form of a page follows the Accept header's q-values,
// the most specific range deciding an offer's q.
func TestNegotiate(t *testing.T) {
	tests := []struct {
		name, accept, format, want string
	}{
		{name: "none", want: typeText},
		{name: "pip", accept: pipAccept, want: typeJSON},
		{name: "html preferred", accept: "application/vnd.pypi.simple.v1+json;q=0.5, application/vnd.pypi.simple.v1+html", want: typeHTML},
		{name: "latest json", accept: "application/vnd.pypi.simple.latest+json", want: typeJSON},
		{name: "text", accept: "text/html", want: typeText},
		{name: "browser", accept: "text/html,application/xhtml+xml,*/*;q=0.8", want: typeText},
		{name: "any", accept: "*/*", want: typeJSON},
		{name: "json refused", accept: "*/*, application/vnd.pypi.simple.v1+json;q=0", want: typeHTML},
		{name: "format parameter", accept: "text/html", format: typeJSON, want: typeJSON},
		{name: "bad q skipped", accept: "application/vnd.pypi.simple.v1+json;q=x, text/html;q=0.2", want: typeText},
		{name: "nothing acceptable", accept: "application/xml", want: ""},
		{name: "all refused", accept: "*/*;q=0", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/pypi/simple/x/?format="+url.QueryEscape(tt.format), nil)
			if tt.accept != "" {
				r.Header.Set("Accept", tt.accept)
			}
			got, err := negotiate(r)
			if got != tt.want || (err != nil) != (tt.want == "") {
				t.Errorf("negotiate(%q) = %q, %v, want %q", tt.accept, got, err, tt.want)
			}
		})
	}
}

type page struct {
	Meta struct {
		APIVersion string `json:"api-version"`
	} `json:"meta"`
	Name  string `json:"name"`
	Files []struct {
		Filename       string            `json:"filename"`
		URL            string            `json:"url"`
		Hashes         map[string]string `json:"hashes"`
		Yanked         any               `json:"yanked"`
		RequiresPython string            `json:"requires-python"`
		UploadTime     string            `json:"upload-time"`
		CoreMetadata   map[string]string `json:"core-metadata"`
		DistInfo       any               `json:"dist-info-metadata"`
	} `json:"files"`
	Versions []string `json:"versions"`
}

// TestProjectPage: file URLs point at the mirror with the index's sha256,
// the version inside the cooldown is gone from the files and versions,
// yanked status, requires-python and core metadata are kept, the HTML
// form says the same, and the filtering is recorded once per session.
func TestProjectPage(t *testing.T) {
	m := newMirror(t, pypitest.Start(t, fixture()...), "")
	code, b, hdr := m.get(t, "/pypi/simple/tiny-pkg/", pipAccept)
	var p page
	if code != 200 || hdr.Get("Content-Type") != typeJSON || json.Unmarshal(b, &p) != nil {
		t.Fatalf("GET page = %d %s %s", code, hdr.Get("Content-Type"), b)
	}
	if p.Meta.APIVersion != "1.1" || p.Name != "tiny-pkg" || len(p.Files) != 3 || strings.Join(p.Versions, " ") != "1.0 1.1" {
		t.Fatalf("page = %s, want 1.0's wheel and sdist and 1.1's wheel", b)
	}
	w := p.Files[0]
	wheel := pypitest.Wheel("Tiny_Pkg", fixture()[0].Versions[0])
	if w.Filename != wheel10 || w.URL != "/pypi/files/tiny-pkg/"+wheel10 || w.Hashes["sha256"] != pypitest.SHA256(wheel) ||
		w.Yanked != nil || w.UploadTime == "" || w.CoreMetadata["sha256"] == "" || w.DistInfo != nil {
		t.Errorf("1.0's wheel = %+v", w)
	}
	if y := p.Files[2]; y.Yanked != "broken" || y.RequiresPython != ">=3.8" {
		t.Errorf("1.1's wheel = %+v, want yanked for \"broken\", requires-python >=3.8", y)
	}
	code, b, hdr = m.get(t, "/pypi/simple/tiny-pkg/", "text/html")
	html := string(b)
	if code != 200 || hdr.Get("Content-Type") != typeText || strings.Count(html, "<a ") != 3 ||
		!strings.Contains(html, `href="/pypi/files/tiny-pkg/`+wheel10+`#sha256=`+pypitest.SHA256(wheel)+`"`) ||
		!strings.Contains(html, `data-yanked="broken"`) || !strings.Contains(html, `data-requires-python="&gt;=3.8"`) ||
		!strings.Contains(html, `data-core-metadata="sha256=`) || !strings.Contains(html, `data-dist-info-metadata="sha256=`) ||
		strings.Contains(html, "2.0") {
		t.Errorf("HTML page = %d %s\n%s", code, hdr.Get("Content-Type"), html)
	}
	if n := m.ix.Count("/simple/tiny-pkg/"); n != 1 {
		t.Errorf("the upstream saw %d page requests, want 1", n)
	}
	if f := m.Filtered(); len(f) != 1 || len(f[0].Removed) != 1 || f[0].Removed[0].Version != "2.0" ||
		f[0].Removed[0].Outcome != fetch.Cooldown || f[0].Removed[0].Rule != "cooldown.min_age" {
		t.Errorf("filtered = %+v, want one record removing 2.0 for the cooldown", f)
	}
}

// TestRedirect: a name not in its normal form, or without the trailing
// slash, is redirected to the normal path, keeping the query.
func TestRedirect(t *testing.T) {
	m := newMirror(t, pypitest.Start(t, fixture()...), "")
	for path, want := range map[string]string{
		"/pypi/simple/Tiny_Pkg/":           "/pypi/simple/tiny-pkg/",
		"/pypi/simple/tiny.pkg":            "/pypi/simple/tiny-pkg/",
		"/pypi/simple/tiny-pkg":            "/pypi/simple/tiny-pkg/",
		"/pypi/simple/TINY--pkg/?format=x": "/pypi/simple/tiny-pkg/?format=x",
		"/pypi/simple":                     "/pypi/simple/",
	} {
		code, _, hdr := m.get(t, path, "")
		if code != http.StatusMovedPermanently || hdr.Get("Location") != want {
			t.Errorf("GET %s = %d to %q, want 301 to %q", path, code, hdr.Get("Location"), want)
		}
	}
}

// TestRoot: the index of projects, in both forms, links to normal names.
func TestRoot(t *testing.T) {
	m := newMirror(t, pypitest.Start(t, fixture()...), "")
	code, b, _ := m.get(t, "/pypi/simple/", typeJSON)
	if code != 200 || !strings.Contains(string(b), `"name":"Tiny_Pkg"`) {
		t.Errorf("JSON index = %d %s", code, b)
	}
	code, b, _ = m.get(t, "/pypi/simple/", "")
	if code != 200 || !strings.Contains(string(b), `<a href="tiny-pkg/">Tiny_Pkg</a>`) {
		t.Errorf("HTML index = %d %s", code, b)
	}
	if n := m.ix.Count("/simple/"); n != 1 {
		t.Errorf("upstream index requests = %d, want 1", n)
	}
}

// TestFile: a verified file is served and recorded with the version read
// from its name; the second request is a cache hit; a version the policy
// refuses is a 403 naming the rule.
func TestFile(t *testing.T) {
	m := newMirror(t, pypitest.Start(t, fixture()...), "blocklist:\n  - purl: pkg:pypi/tiny-pkg@==1.1\n    reason: a test\n")
	want := pypitest.Wheel("Tiny_Pkg", fixture()[0].Versions[0])
	for i, hit := range []bool{false, true} {
		code, b, _ := m.get(t, "/pypi/files/tiny-pkg/"+wheel10, "")
		if code != 200 || !bytes.Equal(b, want) {
			t.Fatalf("GET wheel #%d = %d (%d bytes), want 200 and the wheel", i, code, len(b))
		}
		r := m.Last()
		if r.Outcome != fetch.Served || !r.Verified || r.CacheHit != hit || r.Name != "tiny-pkg" || r.Version != "1.0" ||
			r.Bytes != int64(len(want)) || r.Hash != "sha256:"+pypitest.SHA256(want) ||
			r.URL != m.ix.Files.URL+pypitest.FilePath("tiny-pkg", wheel10) || r.Registry != m.ix.SimpleURL() {
			t.Errorf("record #%d = %+v", i, r)
		}
	}
	if n := m.ix.Count(pypitest.FilePath("tiny-pkg", wheel10)); n != 1 {
		t.Errorf("upstream file requests = %d, want 1", n)
	}
	if code, _, _ := m.get(t, "/pypi/files/tiny-pkg/tiny_pkg-1.0.tar.gz", ""); code != 200 || m.Last().Version != "1.0" {
		t.Errorf("sdist = %d, record %+v", code, m.Last())
	}
	code, b, _ := m.get(t, "/pypi/files/tiny-pkg/tiny_pkg-1.1-py3-none-any.whl", "")
	if r := m.Last(); code != 403 || !strings.Contains(string(b), "blocklist") || r.Outcome != fetch.Blocked || r.Rule == "" {
		t.Errorf("blocked version = %d %s, record %+v", code, b, r)
	}
	code, b, _ = m.get(t, "/pypi/files/tiny-pkg/tiny_pkg-2.0-py3-none-any.whl", "")
	if r := m.Last(); code != 403 || !strings.Contains(string(b), "cooldown.min_age") || r.Outcome != fetch.Cooldown || r.Version != "2.0" {
		t.Errorf("version in the cooldown = %d %s, record %+v", code, b, r)
	}
}

// TestMetadataFile: the PEP 658 metadata file is served, verified, and
// not recorded (it is not installed); a tampered one is refused and
// recorded.
func TestMetadataFile(t *testing.T) {
	ix := pypitest.Start(t, fixture()...)
	ix.Tamper("tiny-pkg", "tiny_pkg-1.1-py3-none-any.whl.metadata")
	m := newMirror(t, ix, "")
	code, b, _ := m.get(t, "/pypi/files/tiny-pkg/"+wheel10+".metadata", "")
	if code != 200 || !bytes.Equal(b, pypitest.Metadata("Tiny_Pkg", fixture()[0].Versions[0])) || len(m.Records()) != 0 {
		t.Errorf("metadata = %d %s, %d records", code, b, len(m.Records()))
	}
	code, b, _ = m.get(t, "/pypi/files/tiny-pkg/tiny_pkg-1.1-py3-none-any.whl.metadata", "")
	if r := m.Last(); code != 403 || r.Outcome != fetch.HashMismatch || !strings.HasSuffix(r.URL, ".metadata") {
		t.Errorf("tampered metadata = %d %s, record %+v", code, b, r)
	}
	if code, _, _ := m.get(t, "/pypi/files/tiny-pkg/tiny_pkg-1.0.tar.gz.metadata", ""); code != 404 {
		t.Errorf("metadata of a file without any = %d, want 404", code)
	}
}

// TestTamperedOrUnhashedFileRefused: a file that does not match its sha256, or has none, is
// never served, and nothing is cached.
func TestTamperedOrUnhashedFileRefused(t *testing.T) {
	ix := pypitest.Start(t, fixture()...)
	ix.Tamper("tiny-pkg", wheel10)
	ix.NoHash("tiny_pkg-1.0.tar.gz")
	m := newMirror(t, ix, "")
	code, b, _ := m.get(t, "/pypi/files/tiny-pkg/"+wheel10, "")
	if r := m.Last(); code != 403 || r.Outcome != fetch.HashMismatch || r.Verified || bytes.Contains(b, []byte("dist-info")) {
		t.Errorf("tampered wheel = %d %q, record %+v", code, b, r)
	}
	if st := m.h.env.Cache.Stats(); st.Blobs != 0 {
		t.Errorf("the cache holds %d blobs after a mismatch", st.Blobs)
	}
	if _, b, _ := m.get(t, "/pypi/simple/tiny-pkg/", pipAccept); bytes.Contains(b, []byte("tiny_pkg-1.0.tar.gz")) {
		t.Errorf("the page lists the file without a sha256: %s", b)
	}
	code, b, _ = m.get(t, "/pypi/files/tiny-pkg/tiny_pkg-1.0.tar.gz", "")
	if r := m.Last(); code != 403 || r.Outcome != fetch.HashMismatch || !strings.Contains(r.Reason, "no sha256") {
		t.Errorf("file without a sha256 = %d %s, record %+v", code, b, r)
	}
	if n := ix.Count(pypitest.FilePath("tiny-pkg", "tiny_pkg-1.0.tar.gz")); n != 0 {
		t.Errorf("the file without a sha256 was fetched %d times, want 0", n)
	}
}

// TestStale: with the upstream gone, the page and the file come from the
// cache, and the record says the metadata was stale.
func TestStale(t *testing.T) {
	ix := pypitest.Start(t, fixture()...)
	m := newMirror(t, ix, "")
	m.h.env.MetaTTL = 0 // every request goes upstream first
	if code, _, _ := m.get(t, "/pypi/files/tiny-pkg/"+wheel10, ""); code != 200 {
		t.Fatalf("warm = %d", code)
	}
	ix.Close()
	code, b, hdr := m.get(t, "/pypi/simple/tiny-pkg/", pipAccept)
	if code != 200 || !strings.Contains(hdr.Get("Warning"), "stale") {
		t.Errorf("page with the upstream down = %d %s (Warning %q)", code, b, hdr.Get("Warning"))
	}
	if code, _, _ := m.get(t, "/pypi/files/tiny-pkg/"+wheel10, ""); code != 200 || !m.Last().CacheHit || !m.Last().MetadataStale {
		t.Errorf("file with the upstream down = %d, record %+v", code, m.Last())
	}
	if code, _, _ := m.get(t, "/pypi/simple/other/", pipAccept); code != 502 {
		t.Errorf("uncached project with the upstream down = %d, want 502", code)
	}
}

// TestCoalesce: concurrent requests for one file fetch it, and its page,
// once.
func TestCoalesce(t *testing.T) {
	ix := pypitest.Start(t, fixture()...)
	m := newMirror(t, ix, "")
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _, _ := m.get(t, "/pypi/files/tiny-pkg/"+wheel10, ""); code != 200 {
				t.Errorf("GET = %d", code)
			}
		}()
	}
	wg.Wait()
	if n := ix.Count(pypitest.FilePath("tiny-pkg", wheel10)); n != 1 {
		t.Errorf("upstream file requests = %d, want 1", n)
	}
	if n := ix.Count("/simple/tiny-pkg/"); n != 1 {
		t.Errorf("upstream page requests = %d, want 1", n)
	}
}

// TestBadPaths: bad names, traversal and files that are not on the
// upstream's page are refused, and only the page is ever asked for.
func TestBadPaths(t *testing.T) {
	ix := pypitest.Start(t, fixture()...)
	m := newMirror(t, ix, "")
	for _, p := range []string{"/pypi/files/tiny-pkg/..%2f..%2fetc%2fpasswd", "/pypi/files/tiny-pkg/.hidden",
		"/pypi/files/Tiny_Pkg/" + wheel10, "/pypi/files/tiny-pkg", "/pypi/files/tiny-pkg/a%00.whl", "/pypi/simple/a%2fb/",
		"/pypi/simple/-bad/", "/pypi/simple/a%20b/", "/pypi/simple/" + strings.Repeat("a", 300) + "/", "/pypi/other",
		"/pypi/files/tiny-pkg/https:%2f%2fevil.example%2fx.whl", "/pypi/files/tiny-pkg/evil-1.0-py3-none-any.whl",
		"/pypi/files/tiny-pkg/tiny_pkg-9.9-py3-none-any.whl"} {
		code, _, _ := m.get(t, p, "")
		if code != 400 && code != 404 {
			t.Errorf("GET %s = %d, want 400 or 404", p, code)
		}
	}
	for _, p := range []string{pypitest.FilePath("tiny-pkg", "evil-1.0-py3-none-any.whl"), "/etc/passwd", "/simple/-bad/"} {
		if n := ix.Count(p); n != 0 {
			t.Errorf("the upstream saw %s %d times", p, n)
		}
	}
}
