package mirror

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/policies/intel"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch/fetchtest"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
	"github.com/sandtrail/sandtrail/registry-mirror/pypi/pypitest"
)

// tinyRecord lists pipFixture's tiny-pkg 1.1, as an OSV MAL record names
// it (PyPI's own spelling, normalized by the store).
const tinyRecord = `{"id":"MAL-2026-501","modified":"2026-11-30T00:00:00Z","summary":"Malicious code in Tiny_Pkg (PyPI)",
"affected":[{"package":{"ecosystem":"PyPI","name":"Tiny_Pkg"},"versions":["1.1"]}]}`

// TestPipKnownMalicious: with a record of tiny-pkg 1.1 in the intel store
// in front of the mirror's policy (intel.Guard, as the daemon wires it), a
// real `pip install tiny-pkg` resolves below the listed version (2.0 is
// inside the cooldown), the pkg.filter names known_malicious and the MAL
// id, and the listed wheel's own URL is refused with a pkg.fetch blocked
// by known_malicious.
func TestPipKnownMalicious(t *testing.T) {
	py := ""
	for _, exe := range pythons(t) {
		py = exe
		break
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "osv", "malicious", "pypi", "tiny-pkg", "MAL-2026-501.json")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte(tinyRecord), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := intel.Open(filepath.Join(dir, "intel.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Import(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	ix := pypitest.Start(t, pipFixture()...)
	eng := fetchtest.Policy(t, "sources:\n  registries:\n    pypi: ["+ix.SimpleURL()+", "+ix.Files.URL+
		"/packages/]\ncooldown:\n  min_age: 48h\n  action: block\n")
	rec := &recorder{}
	m, err := New(Config{CacheDir: t.TempDir(), Upstreams: map[string]string{"pypi": ix.SimpleURL()}, Policy: intel.Guard(eng, store),
		Emit: rec.emit, Host: "h1", Log: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m)
	defer srv.Close()
	target, out, err := pip(t, py, srv.URL, "tiny-pkg")
	if err != nil {
		t.Fatalf("pip install tiny-pkg: %v\n%s", err, out)
	}
	checkInstalled(t, target, "tiny_pkg", "1.0")
	e := rec.await(t, func(e *event.Event) bool { return e.Kind == event.KindPkgFilter && e.Pkg.Name == "tiny-pkg" })
	var listed *event.PkgRemoval
	if e != nil {
		for i, r := range e.Pkg.Removed {
			if r.Version == "1.1" {
				listed = &e.Pkg.Removed[i]
			}
		}
	}
	if listed == nil || listed.Rule != intel.Rule || listed.Outcome != "blocked" || !strings.Contains(listed.Reason, "MAL-2026-501") {
		t.Errorf("pkg.filter = %+v, want 1.1 removed by known_malicious naming MAL-2026-501", e)
	}
	wheel := srv.URL + "/pypi/files/tiny-pkg/" + pypitest.WheelName("tiny-pkg", "1.1")
	if _, out, err := pip(t, py, srv.URL, wheel); err == nil || !strings.Contains(out, "403") {
		t.Errorf("pip install %s = %v, want a 403\n%s", wheel, err, out)
	}
	f := rec.await(t, fetchOf("tiny-pkg", "1.1"))
	if f == nil || f.Pkg.Outcome != "blocked" || f.Pkg.Rule != intel.Rule || !strings.Contains(f.Pkg.Reason, "MAL-2026-501") {
		t.Errorf("pkg.fetch of 1.1's wheel = %+v, want blocked by known_malicious naming MAL-2026-501", f)
	}
}

// TestNpmImportedAfterServing: a record imported into the intel store
// while the mirror runs takes the version it lists out of the next
// packument the mirror serves, though the mirror had decided on every
// version of it, and refuses its tarball (the guard's generation moved);
// a reload (SetPolicy) that approves nothing the mirror serves is refused
// and changes nothing.
func TestNpmImportedAfterServing(t *testing.T) {
	dir := t.TempDir()
	store, err := intel.Open(filepath.Join(dir, "intel.db"), intel.WithRefresh(0))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	reg := npmtest.Start(t, npmtest.Package{Name: "left-pad", Versions: []npmtest.Version{
		{Version: "1.2.0", Published: time.Now().Add(-72 * time.Hour)}, {Version: "1.3.0", Published: time.Now().Add(-72 * time.Hour)}}})
	eng := fetchtest.Policy(t, "sources:\n  registries:\n    npm: ["+reg.URL+"/]\n")
	m, err := New(Config{CacheDir: t.TempDir(), Upstreams: map[string]string{"npm": reg.URL}, Policy: intel.Guard(eng, store),
		Emit: func(*event.Event) {}, Log: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m)
	defer srv.Close()
	served := func() string {
		_, b, _ := fetchtest.Get(t, srv.URL+"/npm/left-pad", "Accept", "application/vnd.npm.install-v1+json")
		return string(b)
	}
	if b := served(); !strings.Contains(b, `"1.3.0"`) {
		t.Fatalf("packument before the import = %s, want 1.3.0 in it", b)
	}
	src := filepath.Join(dir, "MAL-2026-502.json")
	rec := `{"id":"MAL-2026-502","modified":"2026-11-30T00:00:00Z","affected":[{"package":{"ecosystem":"npm","name":"left-pad"},"versions":["1.3.0"]}]}`
	if err := os.WriteFile(src, []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Import(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	if b := served(); strings.Contains(b, `"1.3.0"`) || !strings.Contains(b, `"1.2.0"`) {
		t.Errorf("packument after the import = %s, want 1.2.0 and not 1.3.0", b)
	}
	if code, b, _ := fetchtest.Get(t, srv.URL+"/npm/left-pad/-/left-pad-1.3.0.tgz"); code != 403 || !strings.Contains(string(b), intel.Rule) {
		t.Errorf("tarball of 1.3.0 after the import = %d %s, want a 403 by %s", code, b, intel.Rule)
	}
	if err := m.SetPolicy(fetchtest.Policy(t, "sources:\n  registries:\n    npm: [https://elsewhere.example/]\n")); err == nil {
		t.Error("SetPolicy of a policy that approves no upstream served = nil, want an error")
	}
	if b := served(); !strings.Contains(b, `"1.2.0"`) {
		t.Errorf("packument after a refused reload = %s, want 1.2.0 still served", b)
	}
}
