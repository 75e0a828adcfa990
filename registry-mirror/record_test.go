package mirror

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
)

// TestRedactedUpstream: an upstream configured with credentials in its
// URL (https://user:secret@host/) is fetched with them, but no pkg.fetch
// or pkg.filter the mirror writes carries them: the registry, the
// artifact's URL and the reasons are redacted in the one place the
// mirror builds its events.
func TestRedactedUpstream(t *testing.T) {
	reg := npmtest.Start(t, npmtest.Package{Name: "left-pad", Versions: []npmtest.Version{
		{Version: "1.0.0", Published: time.Now().Add(-30 * 24 * time.Hour)},
		{Version: "1.1.0", Published: time.Now().Add(-time.Hour)}}})
	p, err := policies.Parse("t.yaml", []byte("sources:\n  registries:\n    npm: ["+reg.URL+"/]\ncooldown:\n  min_age: 48h\n  action: block\n"))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policies.New(p)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	withSecret := strings.Replace(reg.URL, "http://", "http://ci-user:s3cr3t-pass@", 1) + "/"
	m, err := New(Config{CacheDir: t.TempDir(), Upstreams: map[string]string{"npm": withSecret}, Policy: eng, Emit: rec.emit,
		Host: "h1", Log: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	for _, path := range []string{"/npm/left-pad", "/npm/left-pad/-/left-pad-1.0.0.tgz", "/npm/left-pad/-/left-pad-1.1.0.tgz"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	kinds := map[string]int{}
	for _, e := range rec.wait(t, 3) {
		kinds[e.Kind]++
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if s := string(b); strings.Contains(s, "s3cr3t") {
			t.Errorf("%s carries the upstream's credentials: %s", e.Kind, s)
		}
		if !strings.Contains(e.Pkg.Registry, "ci-user:"+event.Mask+"@") {
			t.Errorf("%s registry = %q, want the user kept and the password masked", e.Kind, e.Pkg.Registry)
		}
	}
	if kinds[event.KindPkgFetch] != 2 || kinds[event.KindPkgFilter] != 1 {
		t.Errorf("events = %v, want two pkg.fetch (served, cooldown) and one pkg.filter", kinds)
	}
}

// TestFetchEventRedacts: every field of a record that may hold a URL is
// redacted in its pkg.fetch, and in a pkg.filter's removals.
func TestFetchEventRedacts(t *testing.T) {
	secretURL := "https://u:hunter22@registry.example/pkg/-/pkg-1.tgz?X-Amz-Signature=abcdef123456"
	e := fetchEvent(&fetch.Record{Ecosystem: "npm", Name: "pkg", Version: "1", URL: secretURL, Registry: "https://u:hunter22@registry.example/",
		Outcome: fetch.UnknownSource, Verdict: "block", Reason: "fetching " + secretURL + " failed"}, "h", time.Now())
	f := filterEvent(&fetch.Filtered{Ecosystem: "npm", Name: "pkg", Registry: "https://u:hunter22@registry.example/",
		Removed: []fetch.Removal{{Version: "1", Outcome: fetch.Blocked, Reason: "source " + secretURL}}}, "h", time.Now())
	for _, e := range []*event.Event{e, f} {
		b, _ := json.Marshal(e)
		if s := string(b); strings.Contains(s, "hunter22") || strings.Contains(s, "abcdef123456") {
			t.Errorf("%s = %s, want its URLs redacted", e.Kind, s)
		}
	}
}
