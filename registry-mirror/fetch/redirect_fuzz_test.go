package fetch

import (
	"context"
	"errors"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/policies"
)

// FuzzApproveRedirect: whatever Location an upstream answers an artifact's
// request with (resolved against the request's URL, as net/http does), the
// mirror follows it only to the artifact's own scheme and host, or to a
// source the policy approves for the package (here the CDN prefix
// https://cdn.example/blobs/), even under on_unknown_source: flag, which lets a fetch from an unknown source go on; every
// refusal is an ErrRedirect naming its target.
func FuzzApproveRedirect(f *testing.F) {
	for _, s := range []string{
		"https://registry.example/other.tgz", "/a/b.tgz", "https://cdn.example/blobs/sha256/ab", "https://CDN.example:443/blobs/x",
		"https://cdn.example/blobs/../evil", "https://cdn.example/blobs/%2e%2e/evil", "https://cdn.example/blobsx/a", "http://cdn.example/blobs/a",
		"https://registry.example.evil.example/a", "https://registry.example@evil.example/a", "//evil.example/a", "HTTPS://REGISTRY.EXAMPLE/x",
		"https://cdn.example%2fblobs@evil.example/", "https://evil.example/?https://cdn.example/blobs/", "https://169.254.169.254/latest/meta-data/",
	} {
		f.Add(s, "left-pad")
	}
	p, err := policies.Parse("redirect.yaml", []byte("version: 1\nsources:\n  registries:\n    npm: [https://registry.example/, https://cdn.example/blobs/]\non_unknown_source: flag\n"))
	if err != nil {
		f.Fatal(err)
	}
	eng, err := policies.New(p)
	if err != nil {
		f.Fatal(err)
	}
	env := &Env{Policy: eng}
	const artifact = "https://registry.example/left-pad/-/left-pad-1.3.0.tgz"
	base, _ := url.Parse(artifact)
	// The oracle must be able to fail: the CDN is approved, another host not.
	approve := env.approveRedirects(context.Background(), Want{URL: artifact, Ecosystem: "npm", Name: "left-pad"})
	if cdn, _ := url.Parse("https://cdn.example/blobs/sha256/ab"); approve(cdn) != nil || !underCDN(cdn) {
		f.Fatalf("redirect to %s refused, want it approved", cdn)
	}
	if evil, _ := url.Parse("https://evil.example/blobs/sha256/ab"); approve(evil) == nil || underCDN(evil) {
		f.Fatalf("redirect to %s approved, want it refused", evil)
	}
	f.Fuzz(func(t *testing.T, location, name string) {
		target, err := base.Parse(location)
		if err != nil {
			return
		}
		for _, w := range []Want{{URL: artifact, Ecosystem: "npm", Name: name}, {URL: artifact}} {
			err := env.approveRedirects(context.Background(), w)(target)
			if err != nil {
				var re *RedirectError
				if !errors.Is(err, ErrRedirect) || !errors.As(err, &re) || re.Target != target {
					t.Fatalf("refusing %q: %v, want a RedirectError naming it", target, err)
				}
				continue
			}
			if target.Scheme == base.Scheme && strings.EqualFold(target.Host, base.Host) {
				continue
			}
			if w.Name == "" {
				t.Fatalf("redirect to %q approved for an artifact whose package is not named", target)
			}
			if !underCDN(target) {
				t.Fatalf("redirect of %s (%s) to %q approved: not its host, not under https://cdn.example/blobs/", artifact, w.Name, target)
			}
		}
	})
}

// underCDN is the test's own reading of "under the approved prefix
// https://cdn.example/blobs/": that scheme, that host (on its default port
// or none), and a path that, cleaned, lies beneath /blobs/.
func underCDN(u *url.URL) bool {
	if u.Scheme != "https" || !strings.EqualFold(u.Hostname(), "cdn.example") || u.Port() != "" && u.Port() != "443" || u.User != nil && u.User.String() != "" {
		return false
	}
	p := path.Clean("/" + u.Path)
	return p == "/blobs" || strings.HasPrefix(p, "/blobs/")
}
