package main

import (
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/sandtrail/sandtrail/record/event"
	mirror "github.com/sandtrail/sandtrail/registry-mirror"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch/fetchtest"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
)

// TestMirrorVerifyCacheTamperedBlob: verify-cache finds the blob whose bytes changed
// on disk, removes it and exits 2; a clean cache verifies with exit 0.
func TestMirrorVerifyCacheTamperedBlob(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "mirror")
	c, err := cache.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	good, err := c.Put("https://up/a.tgz", strings.NewReader("aaaa"), nil)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := c.Put("https://up/b.tgz", strings.NewReader("bbbb"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, out := runCLI(t, "--data", data, "mirror", "verify-cache"); code != 0 || !strings.Contains(out, "2 artifacts") || !strings.Contains(out, "0 changed") {
		t.Errorf("verify-cache of a clean cache = %d %q, want 0 and 2 artifacts, 0 changed", code, out)
	}
	p := filepath.Join(dir, "blobs", "sha256", bad.SHA256[:2], bad.SHA256)
	if err := os.WriteFile(p, []byte("evil"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runCLI(t, "--data", data, "mirror", "verify-cache")
	if code != exitTampered || !strings.Contains(out, "1 changed and removed") || !strings.Contains(out, bad.SHA256) || strings.Contains(out, good.SHA256) {
		t.Errorf("verify-cache with a tampered blob = %d %q, want %d naming only it", code, out, exitTampered)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("the tampered blob is still there: %v", err)
	}
}

// TestMirrorPrefetch: prefetch of a package-lock.json through a mirror
// fetches each tarball and says so; a lockfile integrity that differs
// from the registry's is reported with exit 2.
func TestMirrorPrefetch(t *testing.T) {
	up := npmtest.Start(t, npmtest.Tree(3, 100)...)
	eng := fetchtest.Policy(t, "sources:\n  registries:\n    npm: ["+up.URL+"/]\n")
	m, err := mirror.New(mirror.Config{CacheDir: t.TempDir(), Policy: eng, Log: hclog.NewNullLogger(),
		Upstreams: map[string]string{"npm": up.URL}, Emit: func(*event.Event) {}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m)
	defer srv.Close()
	tgz := npmtest.Tarball("pkg-1", npmtest.Version{Version: "1.0.0", Files: map[string]string{"index.js": strings.Repeat("// x\n", 20)}})
	lock := func(integrity string) string {
		f := filepath.Join(t.TempDir(), "package-lock.json")
		os.WriteFile(f, []byte(`{"lockfileVersion":3,"packages":{"node_modules/pkg-1":{"version":"1.0.0","resolved":"https://registry.npmjs.org/pkg-1/-/pkg-1-1.0.0.tgz","integrity":"`+integrity+`"}}}`), 0o644)
		return f
	}
	if code, out := runCLI(t, "mirror", "prefetch", "--mirror", srv.URL, lock(npmtest.Integrity(tgz))); code != 0 || !strings.Contains(out, "1 artifacts: 1 fetched") {
		t.Errorf("prefetch = %d %q, want 0 and 1 fetched", code, out)
	}
	if n := up.Count(npmtest.TarballPath("pkg-1", "1.0.0")); n != 1 {
		t.Errorf("the upstream served the tarball %d times, want 1", n)
	}
	code, out := runCLI(t, "mirror", "prefetch", "--mirror", srv.URL, "--format", "json", lock(npmtest.Integrity([]byte("other"))))
	if code != exitTampered || !strings.Contains(out, "differs from what the registry serves") {
		t.Errorf("prefetch with a wrong lockfile integrity = %d %q, want %d", code, out, exitTampered)
	}
	if code, _ := runCLI(t, "mirror", "prefetch", "--mirror", srv.URL, filepath.Join(t.TempDir(), "yarn.lock")); code != exitFailed {
		t.Errorf("prefetch of a missing file = %d, want %d", code, exitFailed)
	}
}

// TestParseUpstreams: a malformed --upstream is refused naming the value
// and the form it should have, and a second upstream for one ecosystem is
// refused rather than replacing the first.
func TestParseUpstreams(t *testing.T) {
	tests := []struct {
		name  string
		flags []string
		want  map[string]string
		err   string
	}{
		{name: "good", flags: []string{"npm=https://r.example/", "deb/debian-security=[signed-by=/k.gpg] http://s.example/debian-security/", "oci=https://o.example/v2/"},
			want: map[string]string{"npm": "https://r.example/", "deb/debian-security": "[signed-by=/k.gpg] http://s.example/debian-security/", "oci": "https://o.example/v2/"}},
		{name: "no equals", flags: []string{"npm:https://r.example/"}, err: `--upstream "npm:https://r.example/": want ECOSYSTEM=URL`},
		{name: "no scheme", flags: []string{"oci=registry.example"}, err: `--upstream "oci=registry.example": oci upstream "registry.example" is not an http(s) URL with a host; want ECOSYSTEM=URL`},
		{name: "unknown ecosystem", flags: []string{"maven=https://m.example/"}, err: `--upstream "maven=https://m.example/": unknown ecosystem "maven"`},
		{name: "named non-deb", flags: []string{"npm/x=https://r.example/"}, err: `unknown ecosystem "npm/x"`},
		{name: "second oci", flags: []string{"oci=https://a.example", "oci=https://b.example"},
			err: `--upstream "oci=https://b.example": oci has an upstream already (--upstream oci=https://a.example)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &Config{}
			err := parseUpstreams(cfg, tt.flags)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseUpstreams(%q) = %v, want %q", tt.flags, err, tt.err)
				}
				return
			}
			if err != nil || !maps.Equal(cfg.Mirror.Upstreams, tt.want) {
				t.Errorf("parseUpstreams(%q) = %v, %v, want %v", tt.flags, cfg.Mirror.Upstreams, err, tt.want)
			}
		})
	}
}
