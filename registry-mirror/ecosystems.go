package mirror

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/crates"
	"github.com/sandtrail/sandtrail/registry-mirror/deb"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/npm"
	"github.com/sandtrail/sandtrail/registry-mirror/oci"
	"github.com/sandtrail/sandtrail/registry-mirror/pypi"
	"github.com/sandtrail/sandtrail/resolver"
)

// ecosystem is one entry of the mirror's list.
type ecosystem struct {
	// name is the ecosystem's name in the configuration (--upstream
	// NAME=URL) and in its records.
	name string
	// prefix is its path on the mirror.
	prefix string
	// upstream is its default upstream.
	upstream string
	// proxy: the mirror also serves the upstream's host in HTTP-proxy mode.
	proxy bool
	new   func(env *fetch.Env, upstream *url.URL, prefix string) (handler, error)
	// newNamed, when set, is used instead of new: the ecosystem takes
	// several upstreams, the plain one (NAME=URL, named "") and others
	// named NAME/UPSTREAM=URL (deb/debian-security=URL). It gets them all,
	// not parsed (the defaults when none is configured), and its handler's
	// Hosts are served in HTTP-proxy mode.
	newNamed func(env *fetch.Env, upstreams map[string]string) (handler, error)
}

// hoster is a handler that serves several upstream hosts in HTTP-proxy
// mode.
type hoster interface {
	Hosts() []string
}

// handlers is the mirror's part of each ecosystem of the registry
// (resolver.Ecosystems): how it serves it. The name, path prefix and
// default upstream are the registry's; a test checks that every ecosystem
// has an entry.
var handlers = map[string]ecosystem{
	npm.Ecosystem:  {new: func(env *fetch.Env, u *url.URL, prefix string) (handler, error) { return npm.New(env, u, prefix), nil }},
	pypi.Ecosystem: {new: func(env *fetch.Env, u *url.URL, prefix string) (handler, error) { return pypi.New(env, u, prefix) }},
	crates.Ecosystem: {new: func(env *fetch.Env, u *url.URL, prefix string) (handler, error) {
		return crates.New(env, u, prefix), nil
	}},
	deb.Ecosystem: {proxy: true,
		newNamed: func(env *fetch.Env, up map[string]string) (handler, error) { return deb.New(env, up) }},
	oci.Ecosystem: {new: func(env *fetch.Env, u *url.URL, _ string) (handler, error) { return oci.New(env, u), nil }},
}

// ecosystems is the one ordered list of the ecosystems the mirror serves:
// the registry's, in its order, each with its entry of handlers.
var ecosystems = served(resolver.Ecosystems(), handlers)

// npmPrefix is npm's path on the mirror, whose handler also serves the
// tarballs npm asks for on the mirror's root (npmRootTarball).
var _, npmPrefix, _ = Upstream(nil, npm.Ecosystem)

// served is the ecosystems of es that hs has an entry for, each with the
// registry's name, prefix and default upstream.
func served(es []*resolver.Ecosystem, hs map[string]ecosystem) []ecosystem {
	var out []ecosystem
	for _, e := range es {
		h, ok := hs[e.Name()]
		if !ok {
			continue
		}
		h.name, h.prefix, h.upstream = e.Name(), e.MirrorPrefix(), e.DefaultUpstream()
		out = append(out, h)
	}
	return out
}

// CheckUpstream checks one upstream of the configuration (Config.
// Upstreams): key names an ecosystem of the list (or, for an ecosystem
// that takes named upstreams, NAME/UPSTREAM), and raw is an http(s) URL
// with a host, after the "[option=value] " a named ecosystem's value may
// begin with (deb's signed-by).
func CheckUpstream(key, raw string) error {
	name, sub, named := strings.Cut(key, "/")
	i := slices.IndexFunc(ecosystems, func(e ecosystem) bool { return e.name == name && (!named || e.newNamed != nil && sub != "") })
	if i < 0 {
		return fmt.Errorf("unknown ecosystem %q (known: %s)", key, strings.Join(Names(), ", "))
	}
	if ecosystems[i].newNamed != nil {
		raw = namedURL(raw)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s upstream %q is not an http(s) URL with a host", key, raw)
	}
	return nil
}

// namedURL is the URL of a named ecosystem's upstream value, after its
// "[option=value] " if any.
func namedURL(raw string) string {
	if strings.HasPrefix(raw, "[") {
		if _, rest, ok := strings.Cut(raw, "] "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return raw
}

// checkApproved checks that pol can approve something from each upstream
// configured (Config.Upstreams, each already checked by CheckUpstream): an
// upstream the operator named that the policy approves nothing from would
// have every package refused as an unknown source, which the clients
// report only as "not found".
func checkApproved(pol fetch.Policy, upstreams map[string]string) error {
	keys := slices.Sorted(maps.Keys(upstreams))
	for _, key := range keys {
		eco, _, _ := strings.Cut(key, "/")
		raw := namedURL(upstreams[key])
		if !pol.UpstreamApproved(eco, raw) {
			return fmt.Errorf("upstream %s=%s: the policy approves no %s registry there, so it would refuse every package from it; add the URL to the policy's sources.registries.%s",
				key, event.RedactURL(raw), eco, eco)
		}
	}
	return nil
}

// Upstream is the upstream a mirror configured with upstreams (Config.
// Upstreams) fetches ecosystem's packages from, and the path prefix it
// serves them under; ok is false for an ecosystem the mirror does not serve.
func Upstream(upstreams map[string]string, ecosystem string) (upstream, prefix string, ok bool) {
	for _, e := range ecosystems {
		if e.name == ecosystem {
			if u := upstreams[e.name]; u != "" {
				return u, e.prefix, true
			}
			return e.upstream, e.prefix, true
		}
	}
	return "", "", false
}
