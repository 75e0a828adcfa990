package launch

import (
	"slices"
	"strings"
	"testing"
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
