package oci

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// TestTokenStaysHome: the token goes to the upstream's host only, not to
// the host a blob is redirected to.
func TestTokenStaysHome(t *testing.T) {
	var mu sync.Mutex
	var cdnAuth []string
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		cdnAuth = append(cdnAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Write([]byte("blob"))
	}))
	t.Cleanup(cdn.Close)
	var reg *httptest.Server
	reg = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/token":
			w.Write([]byte(`{"token":"tok"}`))
		case r.Header.Get("Authorization") != "Bearer tok":
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+reg.URL+`/token",service="reg"`)
			w.WriteHeader(http.StatusUnauthorized)
		default:
			http.Redirect(w, r, cdn.URL+"/blob", http.StatusTemporaryRedirect)
		}
	}))
	t.Cleanup(reg.Close)
	u, _ := url.Parse(reg.URL)
	c := &http.Client{Transport: newTokenTransport(http.DefaultClient, u)}
	resp, err := c.Get(reg.URL + "/v2/a/blobs/sha256:" + hex64)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != 200 || len(cdnAuth) != 1 || cdnAuth[0] != "" {
		t.Errorf("status %d, the CDN saw Authorization %q, want 200 and none", resp.StatusCode, cdnAuth)
	}
}

// TestRealmDowngrade: an https upstream's token realm must be https.
func TestRealmDowngrade(t *testing.T) {
	u, _ := url.Parse("https://registry.example")
	tr := newTokenTransport(http.DefaultClient, u)
	req, _ := http.NewRequest("GET", "https://registry.example/v2/a/manifests/latest", nil)
	if _, err := tr.fetchToken(req, map[string]string{"realm": "http://auth.example/token"}); err == nil {
		t.Error("fetchToken accepted an http realm for an https upstream")
	}
}
