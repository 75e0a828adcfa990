package release

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestFetchRealNpm reads a real packument from registry.npmjs.org, which
// these machines can reach; it skips, saying why, when the registry is not
// reachable.
func TestFetchRealNpm(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the real npm registry in -short mode")
	}
	conn, err := net.DialTimeout("tcp", "registry.npmjs.org:443", 5*time.Second)
	if err != nil {
		t.Skipf("registry.npmjs.org is not reachable: %v", err)
	}
	conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, err := New().Fetch(ctx, "npm", "https://registry.npmjs.org/", "left-pad")
	if err != nil {
		t.Fatalf("Fetch(npm, left-pad) = %v", err)
	}
	v, err := in.Resolve("npm", "^1.1.0")
	if err != nil {
		t.Fatalf("Resolve(^1.1.0) = %v", err)
	}
	if v.Version != "1.3.0" || v.Published.IsZero() || v.Published.After(time.Now()) ||
		!strings.HasPrefix(v.Artifact, "https://registry.npmjs.org/left-pad/-/left-pad-") {
		t.Errorf("left-pad@^1.1.0 = %+v, want 1.3.0 with a past publish time and a registry tarball", v)
	}
	if in.Tags["latest"] != "1.3.0" {
		t.Errorf("left-pad dist-tags = %v, want latest 1.3.0", in.Tags)
	}
}
