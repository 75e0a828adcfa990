package oci

import (
	"net/url"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
)

// FuzzUpstream: whatever the upstream URL the operator gives (one that
// mirror.CheckUpstream accepts: http(s) with a host), the handler's API
// root is on that scheme and host, ends in /v2/, has no query or fragment,
// and is the same with or without the /v2/ that clients add (one: a path
// ending /v2/v2/ keeps one); given back to New it is itself.
func FuzzUpstream(f *testing.F) {
	for _, s := range []string{"https://r.example", "https://r.example/v2/", "http://127.0.0.1:5000/", "https://r.example/mirror/v2",
		"https://r.example/v2/v2/", "https://u:p@r.example:443/a%2Fb/?q=1#f", "https://r.example//", "https://[::1]:5000/x/v2//"} {
		f.Add(s)
	}
	env := &fetch.Env{Upstream: &fetch.Upstream{}}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return
		}
		root := New(env, u).upstream
		r, err := url.Parse(root)
		if err != nil {
			t.Fatalf("New(%q).upstream = %q, which does not parse: %v", raw, root, err)
		}
		if r.Scheme != u.Scheme || r.Host != u.Host || r.RawQuery != "" || r.Fragment != "" || !strings.HasSuffix(r.Path, Prefix) {
			t.Fatalf("New(%q).upstream = %q, want %s://%s…%s with no query or fragment", raw, root, u.Scheme, u.Host, Prefix)
		}
		with := *u
		with.Path = strings.TrimSuffix(u.Path, "/") + Prefix
		with.RawPath = ""
		if got := New(env, &with).upstream; got != root && !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/v2") {
			t.Fatalf("New(%q).upstream = %q, but with /v2/ added (%q) it is %q", raw, root, with.String(), got)
		}
		if got := New(env, r).upstream; got != root {
			t.Fatalf("New(%q).upstream = %q, which given to New is %q", raw, root, got)
		}
	})
}
