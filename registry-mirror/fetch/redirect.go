package fetch

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/sandtrail/sandtrail/policies"
)

// ErrRedirect: the upstream redirected an artifact's request to a URL
// that is not an approved source of it.
var ErrRedirect = errors.New("fetch: redirected to a source that is not approved")

// RuleRedirect is the rule named in the record of an artifact refused
// because its upstream redirected to a source that is not approved.
const RuleRedirect = "mirror.redirect"

// RedirectError is a redirect the mirror refused to follow: its target,
// and why. It wraps ErrRedirect.
type RedirectError struct {
	Target *url.URL
	Why    string
}

func (e *RedirectError) Error() string {
	return "the upstream redirected to " + e.Target.String() + ", " + e.Why
}

// Is makes a RedirectError an ErrRedirect.
func (e *RedirectError) Is(target error) bool { return target == ErrRedirect }

// maxRedirects is how many redirects one upstream request follows, as
// net/http's default does.
const maxRedirects = 10

type redirectsKey struct{}

// withRedirects returns ctx approving each redirect of an upstream request
// with approve.
func withRedirects(ctx context.Context, approve func(*url.URL) error) context.Context {
	return context.WithValue(ctx, redirectsKey{}, approve)
}

// checkRedirect is the CheckRedirect of every upstream request: the
// approval its context carries (an artifact's) decides each hop, then the
// client's own CheckRedirect, or net/http's limit of 10.
func checkRedirect(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if approve, ok := req.Context().Value(redirectsKey{}).(func(*url.URL) error); ok {
			if err := approve(req.URL); err != nil {
				return err
			}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxRedirects {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// approveRedirects approves the redirects on the way to w's artifact: to
// the scheme and host of w.URL itself, or to a URL that the policy
// approves as a source of the package w names (its sources.registries
// prefixes for the ecosystem, which are its registries and artifact hosts:
// a CDN that blobs are redirected to is listed there). Nothing else is
// followed, whatever on_unknown_source says: a redirect is the upstream's
// choice, not the operator's.
func (env *Env) approveRedirects(ctx context.Context, w Want) func(*url.URL) error {
	first, _ := url.Parse(w.URL)
	return func(target *url.URL) error {
		if first != nil && target.Scheme == first.Scheme && strings.EqualFold(target.Host, first.Host) {
			return nil
		}
		if w.Ecosystem == "" || w.Name == "" {
			return &RedirectError{Target: target, Why: "another host than the artifact's"}
		}
		d := env.Policy.Package(ctx, policies.PackageRequest{Ecosystem: w.Ecosystem, Name: w.Name, Source: target.String()})
		for _, c := range d.Checks {
			if c.Name == policies.CheckSource && c.Verdict == policies.Allow {
				return nil
			}
		}
		return &RedirectError{Target: target, Why: "which the policy does not approve as a " + w.Ecosystem + " source (sources.registries)"}
	}
}
