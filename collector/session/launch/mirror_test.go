package launch

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/resolver/ecosystem"
)

// TestMirrorEnv: every manager the mirror serves is pointed at it, npm's
// family at /npm/ and pip's at /pypi/simple/; pip trusts a mirror off
// loopback by name, and berry is let use it over http.
func TestMirrorEnv(t *testing.T) {
	tests := []struct {
		name, mirror string
		want         []string
	}{
		{"loopback", "http://127.0.0.1:8484", []string{
			"SANDTRAIL_MIRROR=http://127.0.0.1:8484",
			"npm_config_registry=http://127.0.0.1:8484/npm/",
			"YARN_REGISTRY=http://127.0.0.1:8484/npm/",
			"YARN_NPM_REGISTRY_SERVER=http://127.0.0.1:8484/npm/",
			"BUN_CONFIG_REGISTRY=http://127.0.0.1:8484/npm/",
			"NPM_CONFIG_REGISTRY=http://127.0.0.1:8484/npm/",
			"COREPACK_NPM_REGISTRY=http://127.0.0.1:8484/npm",
			"PIP_INDEX_URL=http://127.0.0.1:8484/pypi/simple/",
			"UV_DEFAULT_INDEX=http://127.0.0.1:8484/pypi/simple/",
			"UV_INDEX_URL=http://127.0.0.1:8484/pypi/simple/",
			"CARGO_REGISTRIES_CRATES_IO_PROTOCOL=sparse",
			"YARN_UNSAFE_HTTP_WHITELIST=127.0.0.1",
		}},
		{"an address off loopback, trailing slash", "http://192.0.2.1:8484/", []string{
			"SANDTRAIL_MIRROR=http://192.0.2.1:8484",
			"npm_config_registry=http://192.0.2.1:8484/npm/",
			"YARN_REGISTRY=http://192.0.2.1:8484/npm/",
			"YARN_NPM_REGISTRY_SERVER=http://192.0.2.1:8484/npm/",
			"BUN_CONFIG_REGISTRY=http://192.0.2.1:8484/npm/",
			"NPM_CONFIG_REGISTRY=http://192.0.2.1:8484/npm/",
			"COREPACK_NPM_REGISTRY=http://192.0.2.1:8484/npm",
			"PIP_INDEX_URL=http://192.0.2.1:8484/pypi/simple/",
			"UV_DEFAULT_INDEX=http://192.0.2.1:8484/pypi/simple/",
			"UV_INDEX_URL=http://192.0.2.1:8484/pypi/simple/",
			"CARGO_REGISTRIES_CRATES_IO_PROTOCOL=sparse",
			"YARN_UNSAFE_HTTP_WHITELIST=192.0.2.1",
			"PIP_TRUSTED_HOST=192.0.2.1:8484",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MirrorEnv(tt.mirror); !slices.Equal(got, tt.want) {
				t.Errorf("MirrorEnv(%q) =\n%s\nwant\n%s", tt.mirror, strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestMirrorEnvCoversEveryManager: every ecosystem of the registry
// (resolver/ecosystem) whose manager a session may run is pointed at the
// mirror by MirrorEnv, at its mirror prefix, or is one of those pointed
// there another way, named here with the way. A new ecosystem fails here
// until it is one or the other.
func TestMirrorEnvCoversEveryManager(t *testing.T) {
	elsewhere := map[string]string{
		ecosystem.Cargo: "the cargo shim's --config replaces crates.io (cargo reads no source replacement from the environment)",
		ecosystem.Deb:   "the apt broker and install.sh's sources point apt at the mirror",
	}
	const mirror = "http://127.0.0.1:8484"
	env := MirrorEnv(mirror)
	for _, e := range ecosystem.List() {
		if e.Manager == "" {
			continue
		}
		pointed := slices.ContainsFunc(env, func(kv string) bool {
			_, v, _ := strings.Cut(kv, "=")
			return strings.HasPrefix(v, mirror+e.MirrorPrefix)
		})
		if _, other := elsewhere[e.Name]; pointed == other {
			t.Errorf("%s (manager %s): MirrorEnv points it at %s%s: %v; pointed there another way: %v (want exactly one)",
				e.Name, e.Manager, mirror, e.MirrorPrefix, pointed, other)
		}
	}
}
