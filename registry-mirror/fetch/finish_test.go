package fetch

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/cache"
)

// firstWrite is a ResponseWriter that calls before at its first write of
// headers or bytes.
type firstWrite struct {
	*httptest.ResponseRecorder
	before func()
	done   bool
}

func (w *firstWrite) once() {
	if !w.done {
		w.done = true
		w.before()
	}
}

func (w *firstWrite) WriteHeader(code int) { w.once(); w.ResponseRecorder.WriteHeader(code) }

func (w *firstWrite) Write(b []byte) (int, error) { w.once(); return w.ResponseRecorder.Write(b) }

// TestServeRecorded: the record of a served artifact is made before the
// first byte of the response, once, with its latency from rec.Start; a
// Finish after it records nothing more.
func TestServeRecorded(t *testing.T) {
	var recs []Record
	env := &Env{Record: func(r *Record) { recs = append(recs, *r) }}
	c, err := cache.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	art, err := c.Put("https://up/a/-/a-1.0.0.tgz", strings.NewReader("the artifact"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.OpenBody(art.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec := &Record{Ecosystem: "npm", Name: "a", Version: "1.0.0", Start: time.Now().Add(-time.Second)}
	rec.ServedArtifact(art, false)
	w := &firstWrite{ResponseRecorder: httptest.NewRecorder()}
	w.before = func() {
		if len(recs) != 1 {
			t.Errorf("the response began with %d records of it, want 1: the record first", len(recs))
		}
	}
	env.ServeRecorded(w, httptest.NewRequest(http.MethodGet, "/a/-/a-1.0.0.tgz", nil), rec, art, f, "application/octet-stream")
	env.Finish(rec, time.Now(), nil)
	if w.Body.String() != "the artifact" {
		t.Errorf("served %q, want the artifact's bytes", w.Body.String())
	}
	if len(recs) != 1 || recs[0].Outcome != Served || !recs[0].Verified || recs[0].Latency < time.Second {
		t.Errorf("records %+v, want one, served and verified, with the latency from rec.Start", recs)
	}
}

// TestServeFromMemory: a small artifact, served from memory, is written
// whole to a plain request, and a range of it to a range request, with
// its sha256 as the ETag, which a conditional request matches.
func TestServeFromMemory(t *testing.T) {
	c, err := cache.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	art, err := c.Put("https://up/a.tgz", strings.NewReader("the artifact"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, header, value string
		code                int
		body                string
	}{
		{"plain", "", "", 200, "the artifact"},
		{"range", "Range", "bytes=4-11", 206, "artifact"},
		{"conditional", "If-None-Match", `"` + art.SHA256 + `"`, 304, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body, err := c.OpenBody(art.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			defer body.Close()
			if body.File() != nil {
				t.Fatal("OpenBody of a small blob gave its file, want it from memory")
			}
			r := httptest.NewRequest(http.MethodGet, "/a.tgz", nil)
			if tt.header != "" {
				r.Header.Set(tt.header, tt.value)
			}
			w := httptest.NewRecorder()
			Serve(w, r, art, body, "application/octet-stream")
			if w.Code != tt.code || w.Body.String() != tt.body || w.Header().Get("ETag") != `"`+art.SHA256+`"` {
				t.Errorf("Serve = %d %q (ETag %s), want %d %q", w.Code, w.Body.String(), w.Header().Get("ETag"), tt.code, tt.body)
			}
		})
	}
}
