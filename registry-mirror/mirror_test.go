package mirror

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
)

// sessionsOf maps one cgroup id to a session.
type sessionsOf map[uint64]string

func (s sessionsOf) Lookup(id uint64) (string, bool) { v, ok := s[id]; return v, ok }

type recorder struct {
	mu  sync.Mutex
	evs []*event.Event
}

func (r *recorder) emit(e *event.Event) { r.mu.Lock(); r.evs = append(r.evs, e); r.mu.Unlock() }

func (r *recorder) all() []*event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*event.Event(nil), r.evs...)
}

// wait returns the events once there are at least n, waiting up to 10 s:
// the mirror records a served artifact just after its last byte, which the
// client may have read before.
func (r *recorder) wait(t *testing.T, n int) []*event.Event {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(r.all()) < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d events, want %d", len(r.all()), n)
		}
	}
	return r.all()
}

func start(t *testing.T, reg *npmtest.Registry, sessions Sessions) (*httptest.Server, *recorder) {
	t.Helper()
	p, err := policies.Parse("t.yaml", []byte("sources:\n  registries:\n    npm: ["+reg.URL+"/]\n"))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policies.New(p)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	m, err := New(Config{CacheDir: t.TempDir(), Upstreams: map[string]string{"npm": reg.URL}, Policy: eng, Emit: rec.emit,
		Sessions: sessions, Host: "h1", Log: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return srv, rec
}

// TestMirror: npm is served beneath /npm/, anything else is a 404 naming
// the prefixes, a proxy request for a host that is not an upstream is
// refused and recorded, and each fetch is a pkg.fetch event with the
// client's address.
func TestMirror(t *testing.T) {
	reg := npmtest.Start(t, npmtest.Package{Name: "left-pad", Versions: []npmtest.Version{{Version: "1.3.0", Published: time.Now().Add(-72 * time.Hour)}}})
	srv, rec := start(t, reg, nil)
	resp, err := http.Get(srv.URL + "/npm/left-pad/-/left-pad-1.3.0.tgz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("tarball = %d", resp.StatusCode)
	}
	evs := rec.wait(t, 1)
	if len(evs) != 1 || evs[0].Kind != event.KindPkgFetch || evs[0].Source != event.SourceMirror {
		t.Fatalf("events = %+v, want one pkg.fetch", evs)
	}
	e := evs[0]
	if err := e.Validate(); err != nil {
		t.Errorf("the pkg.fetch does not validate: %v", err)
	}
	if p := e.Pkg; p.Outcome != "served" || !*p.Verified || p.Purl != "pkg:npm/left-pad@1.3.0" || !strings.HasPrefix(p.Client, "127.0.0.1:") ||
		p.Cache != "miss" || e.Host != "h1" || e.SessionID != "" {
		t.Errorf("pkg.fetch = %+v %+v", *e, *p)
	}
	if resp, _ := http.Get(srv.URL + "/nope/simple/x/"); resp.StatusCode != 404 {
		t.Errorf("unknown prefix = %d, want 404", resp.StatusCode)
	}
	if resp, _ := http.Post(srv.URL+"/npm/left-pad", "application/json", nil); resp.StatusCode != 405 {
		t.Errorf("POST = %d, want 405", resp.StatusCode)
	}
	// HTTP-proxy form for a host that is not an upstream.
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://deb.example.invalid/debian/dists/bookworm/InRelease HTTP/1.1\r\nHost: deb.example.invalid\r\n\r\n")
	pr, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if pr.StatusCode != 403 {
		t.Errorf("proxy request for an unknown host = %d, want 403", pr.StatusCode)
	}
	evs = rec.all()
	if last := evs[len(evs)-1]; last.Pkg.Outcome != "unknown_source" || last.Pkg.Name != "deb.example.invalid" {
		t.Errorf("proxy refusal = %+v", last.Pkg)
	}
}

// TestErrorForms: each ecosystem's clients get errors in a form they read:
// OCI's distribution spec errors beneath /v2/ (a method too), npm's
// {"error": …} everywhere else, valid JSON whatever the request held.
func TestErrorForms(t *testing.T) {
	reg := npmtest.Start(t)
	srv, _ := start(t, reg, nil)
	for _, tt := range []struct {
		method, path string
		status       int
		oci          bool
	}{
		{"GET", "/npm/%00%1b%5b31m", 400, false},
		{"GET", "/nope/x", 404, false},
		{"GET", "/v2/library/alpine/manifests/%00", 400, true},
		{"POST", "/v2/library/alpine/blobs/uploads/", 405, true},
	} {
		req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body struct {
			Error  string `json:"error"`
			Errors []struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"errors"`
		}
		err = json.Unmarshal(b, &body)
		ok := err == nil && resp.StatusCode == tt.status
		if tt.oci {
			ok = ok && len(body.Errors) == 1 && body.Errors[0].Code != "" && strings.HasPrefix(body.Errors[0].Message, "sandtrail mirror: ")
		} else {
			ok = ok && strings.HasPrefix(body.Error, "sandtrail mirror: ")
		}
		if !ok {
			t.Errorf("%s %s = %d %s (%v)", tt.method, tt.path, resp.StatusCode, b, err)
		}
	}
}

// TestMirrorDialed: the default upstream client tells Dialed the host name
// and the address of each upstream connection it makes, which the host
// refuses to its sessions.
func TestMirrorDialed(t *testing.T) {
	reg := npmtest.Start(t, npmtest.Package{Name: "left-pad", Versions: []npmtest.Version{{Version: "1.3.0", Published: time.Now().Add(-72 * time.Hour)}}})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(reg.URL, "http://"))
	upstream := "http://localhost:" + port
	p, err := policies.Parse("t.yaml", []byte("sources:\n  registries:\n    npm: ["+upstream+"/, "+reg.URL+"/]\n"))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policies.New(p)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	dialed := map[string]bool{}
	m, err := New(Config{CacheDir: t.TempDir(), Upstreams: map[string]string{"npm": upstream}, Policy: eng, Emit: func(*event.Event) {},
		Log: hclog.NewNullLogger(), Dialed: func(host string, addr netip.Addr) {
			mu.Lock()
			dialed[host+" "+addr.String()] = true
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/npm/left-pad/-/left-pad-1.3.0.tgz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("tarball = %d", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	// The packument is fetched from localhost, the tarball from the
	// address the fixture's packument names.
	if !dialed["localhost 127.0.0.1"] || !dialed["127.0.0.1 127.0.0.1"] || len(dialed) != 2 {
		t.Errorf("Dialed saw %v, want localhost and 127.0.0.1, each at 127.0.0.1", dialed)
	}
}

// TestMirrorNpmRootTarball: an npm tarball asked for on the mirror's root
// (where npm's replace-registry-host puts a registry.npmjs.org tarball URL)
// is served and recorded as one beneath /npm/; other root paths are not.
func TestMirrorNpmRootTarball(t *testing.T) {
	reg := npmtest.Start(t, npmtest.Package{Name: "left-pad", Versions: []npmtest.Version{{Version: "1.3.0", Published: time.Now().Add(-72 * time.Hour)}}})
	srv, rec := start(t, reg, nil)
	resp, err := http.Get(srv.URL + "/left-pad/-/left-pad-1.3.0.tgz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("tarball on the root = %d, want 200", resp.StatusCode)
	}
	if evs := rec.wait(t, 1); evs[0].Pkg.Purl != "pkg:npm/left-pad@1.3.0" || evs[0].Pkg.Outcome != "served" {
		t.Errorf("pkg.fetch = %+v, want left-pad 1.3.0 served", *evs[0].Pkg)
	}
	for _, p := range []string{"/left-pad", "/a/b/-/x.tgz", "/left-pad/-/sub/x.tgz", "/-/x.tgz", "/left-pad/-/left-pad-1.3.0.tar"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
		}
	}
}
