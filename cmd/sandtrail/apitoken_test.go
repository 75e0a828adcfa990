package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/daemon/api"
)

func TestAPIToken(t *testing.T) {
	data := t.TempDir()
	t.Setenv("SANDTRAIL_CONFIG", filepath.Join(t.TempDir(), "none.yaml"))
	os.WriteFile(os.Getenv("SANDTRAIL_CONFIG"), []byte("log_level: error\n"), 0o600)
	code, out := runCLI(t, "--data", data, "api", "token", "--scope", "sess-1", "--name", "orchestrator one")
	if code != exitOK {
		t.Fatalf("api token = %d %s", code, out)
	}
	tok := strings.TrimSpace(out)
	path := filepath.Join(data, "api-tokens")
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), tok) || !strings.Contains(string(b), "session:sess-1 orchestrator-one") {
		t.Errorf("tokens file = %q: want the hash and scope, never the token", b)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tokens file mode %v, %v; want 0600", fi.Mode(), err)
	}
	if scope, ok, err := api.NewTokenFile(path).Scope(tok); !ok || err != nil || scope != "sess-1" {
		t.Errorf("the printed token's scope = %q %v %v, want sess-1", scope, ok, err)
	}
	if code, _ := runCLI(t, "--data", data, "api", "token", "--scope", "../x"); code != exitFailed {
		t.Errorf("a bad scope = %d, want a usage error", code)
	}
}
