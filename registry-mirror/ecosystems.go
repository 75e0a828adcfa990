package mirror

import (
	"net/url"

	"github.com/sandtrail/sandtrail/registry-mirror/crates"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/npm"
	"github.com/sandtrail/sandtrail/registry-mirror/oci"
	"github.com/sandtrail/sandtrail/registry-mirror/pypi"
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
	new   func(env *fetch.Env, upstream *url.URL) (handler, error)
}

// ecosystems is the one ordered list of the ecosystems the mirror serves.
var ecosystems = []ecosystem{
	{name: npm.Ecosystem, prefix: "/npm/", upstream: npm.DefaultUpstream,
		new: func(env *fetch.Env, u *url.URL) (handler, error) { return npm.New(env, u, "/npm/"), nil }},
	{name: pypi.Ecosystem, prefix: "/pypi/", upstream: pypi.DefaultUpstream,
		new: func(env *fetch.Env, u *url.URL) (handler, error) { return pypi.New(env, u, "/pypi/") }},
	{name: crates.Ecosystem, prefix: "/crates/", upstream: crates.DefaultUpstream,
		new: func(env *fetch.Env, u *url.URL) (handler, error) { return crates.New(env, u, "/crates/"), nil }},
	{name: oci.Ecosystem, prefix: oci.Prefix, upstream: oci.DefaultUpstream,
		new: func(env *fetch.Env, u *url.URL) (handler, error) { return oci.New(env, u), nil }},
}
