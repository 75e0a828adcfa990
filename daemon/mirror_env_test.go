package daemon

import (
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/resolver"
)

// TestSessionEnvUsesTheRegistrysPrefixes: the environment that points a
// session's managers at the mirror (launch.MirrorEnv, which the collector
// writes without the resolver) names the paths the registry says the
// mirror serves npm and PyPI beneath.
func TestSessionEnvUsesTheRegistrysPrefixes(t *testing.T) {
	const url = "http://127.0.0.1:8484"
	prefix := func(eco string) string {
		e, err := resolver.Lookup(eco)
		if err != nil {
			t.Fatal(err)
		}
		return e.MirrorPrefix()
	}
	want := map[string]string{
		"npm_config_registry":   url + prefix(resolver.NPM),
		"COREPACK_NPM_REGISTRY": url + strings.TrimSuffix(prefix(resolver.NPM), "/"),
		"PIP_INDEX_URL":         url + prefix(resolver.PyPI) + "simple/",
	}
	env := (&Mirror{URL: url}).sessionEnv()
	for k, v := range want {
		found := false
		for _, kv := range env {
			if got, ok := strings.CutPrefix(kv, k+"="); ok {
				found = true
				if got != v {
					t.Errorf("sessionEnv() %s=%s, want %s", k, got, v)
				}
			}
		}
		if !found {
			t.Errorf("sessionEnv() has no %s", k)
		}
	}
}
