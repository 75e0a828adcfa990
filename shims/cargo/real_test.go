package cargo

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/crates/cratestest"
	"github.com/sandtrail/sandtrail/shims"
)

// TestRealCargo: the plan's Args point a real cargo fetch at a stand-in
// for the mirror's /crates/index/ (the loopback fixture index), and
// Collect reads back both crates with their checksums, the direct one
// with its spec, the transitive one with its parent. A second fetch in a
// new CARGO_HOME from the now unchanged lock reports both again (they
// were downloaded), and so does a third in the same home: the crates it
// builds from are on disk.
func TestRealCargo(t *testing.T) {
	bin := cratestest.Cargo(t)
	old := time.Now().Add(-30 * 24 * time.Hour)
	crates := []cratestest.Crate{
		{Name: "leaf", Versions: []cratestest.Version{{Version: "1.0.0", Published: old}}},
		{Name: "mid", Versions: []cratestest.Version{{Version: "0.2.0", Published: old, Deps: []cratestest.Dep{{Name: "leaf", Req: "^1"}}}}},
	}
	reg := cratestest.Start(t, crates...)
	mirror := httptest.NewServer(http.StripPrefix("/crates/index", reg.Config.Handler))
	t.Cleanup(mirror.Close)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "Cargo.toml"), "[package]\nname = \"p\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nmid = \"0.2\"\n")
	write(t, filepath.Join(dir, "src", "lib.rs"), "")
	sum := func(name string, v cratestest.Version) string {
		return "sha256:" + cratestest.Cksum(cratestest.CrateFile(name, v))
	}
	src := "registry+https://github.com/rust-lang/crates.io-index"
	want := []shims.Package{
		{Name: "leaf", Version: "1.0.0", SourceURL: src, Hash: sum("leaf", crates[0].Versions[0]), RequestedBy: "mid"},
		{Name: "mid", Version: "0.2.0", SourceURL: src, Hash: sum("mid", crates[1].Versions[0]), Direct: true, Requested: "0.2"},
	}
	home := t.TempDir()
	runs := []struct {
		name string
		home string
		want []shims.Package
	}{{"first fetch", home, want}, {"new CARGO_HOME", t.TempDir(), want}, {"warm", "", want}}
	for _, r := range runs {
		if r.home != "" {
			home = r.home
		}
		env := map[string]string{"CARGO_HOME": home, "HOME": home}
		p, err := Plan([]string{"fetch"}, shims.Context{Dir: dir, Mirror: mirror.URL, Getenv: func(k string) string { return env[k] }})
		if err != nil || p == nil {
			t.Fatalf("%s: Plan(fetch) = %v, %v", r.name, p, err)
		}
		cmd := exec.Command(bin, p.Args...)
		cmd.Dir = dir
		rustup := os.Getenv("RUSTUP_HOME")
		if rustup == "" {
			h, _ := os.UserHomeDir()
			rustup = filepath.Join(h, ".rustup")
		}
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CARGO_HOME=" + home, "RUSTUP_HOME=" + rustup,
			"CARGO_NET_RETRY=0", "CARGO_TERM_COLOR=never"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: cargo %q: %v\n%s", r.name, p.Args, err, out)
		}
		got, err := p.Collect(0)
		if err != nil || !equalPkgs(got, r.want) {
			t.Errorf("%s: Collect = %+v, %v, want %+v", r.name, got, err, r.want)
		}
	}
}

func equalPkgs(a, b []shims.Package) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Version != b[i].Version || a[i].SourceURL != b[i].SourceURL || a[i].Hash != b[i].Hash ||
			a[i].Direct != b[i].Direct || a[i].Requested != b[i].Requested || a[i].RequestedBy != b[i].RequestedBy {
			return false
		}
	}
	return true
}
