package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/registry-mirror/cache"
)

// TestMirrorVerifyCache: verify-cache finds the blob whose bytes changed
// on disk, removes it and exits 2; a clean cache verifies with exit 0.
func TestMirrorVerifyCache(t *testing.T) {
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
