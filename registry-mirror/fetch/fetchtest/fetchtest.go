// Package fetchtest is what an ecosystem handler's tests share: an Env
// with a real policy engine, a cache in a temporary directory and a
// recorder of the records and filterings the handler makes, and the
// handler served on loopback as the mirror serves it.
package fetchtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
)

// Env is a fetch.Env that keeps what is recorded.
type Env struct {
	*fetch.Env

	mu       sync.Mutex
	records  []fetch.Record
	filtered []fetch.Filtered
}

// New returns an Env deciding with the policy in yaml, its metadata fresh
// for a minute, artifacts and metadata bounded to 1 MiB.
func New(t testing.TB, yaml string) *Env {
	t.Helper()
	eng := Policy(t, yaml)
	c, err := cache.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{}
	e.Env = &fetch.Env{Cache: c, Policy: eng, Log: hclog.NewNullLogger(), MetaTTL: time.Minute, MaxArtifact: 1 << 20, Now: time.Now,
		Upstream: &fetch.Upstream{HTTP: http.DefaultClient, MaxMeta: 1 << 20},
		Record:   func(r *fetch.Record) { e.mu.Lock(); e.records = append(e.records, *r); e.mu.Unlock() },
		Filter:   func(f *fetch.Filtered) { e.mu.Lock(); e.filtered = append(e.filtered, *f); e.mu.Unlock() }}
	return e
}

// Policy compiles a policy written in YAML.
func Policy(t testing.TB, yaml string) *policies.Engine {
	t.Helper()
	p, err := policies.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policies.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// Records returns the records so far.
func (e *Env) Records() []fetch.Record {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]fetch.Record(nil), e.records...)
}

// Last returns the last record (zero when there is none).
func (e *Env) Last() fetch.Record {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.records) == 0 {
		return fetch.Record{}
	}
	return e.records[len(e.records)-1]
}

// Filtered returns the filterings so far.
func (e *Env) Filtered() []fetch.Filtered {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]fetch.Filtered(nil), e.filtered...)
}

// Serve serves the handler function serve beneath prefix on loopback,
// writing its errors as the mirror does, until the test ends.
func Serve(t testing.TB, prefix string, serve func(w http.ResponseWriter, r *http.Request, path string) error) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := serve(w, r, strings.TrimPrefix(r.URL.EscapedPath(), prefix)); err != nil {
			fetch.Write(w, err)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Get gets url with the header's name, value pairs, and returns the status,
// body and header of the response.
func Get(t testing.TB, url string, header ...string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}
