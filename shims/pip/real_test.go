package pip

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/pypi/pypitest"
	"github.com/sandtrail/sandtrail/shims"
)

func fixture() []pypitest.Project {
	old := time.Now().Add(-30 * 24 * time.Hour)
	return []pypitest.Project{
		{Name: "fixture-pkg", Versions: []pypitest.Version{{Version: "1.0", Uploaded: old}, {Version: "1.5", Uploaded: old, Deps: []string{"Fixture_Dep>=0.1"}},
			{Version: "2.0", Uploaded: old}}},
		{Name: "Fixture_Dep", Versions: []pypitest.Version{{Version: "0.1", Uploaded: old}}},
	}
}

func wheelHash(name, version string) string {
	for _, p := range fixture() {
		for _, v := range p.Versions {
			if p.Name == name && v.Version == version {
				return "sha256:" + pypitest.SHA256(pypitest.Wheel(p.Name, v))
			}
		}
	}
	return ""
}

// TestRealInstall runs the real pip with the plan's Args against the
// fixture index (pip 23.0.1 of /usr/bin/python3) and checks what Collect
// reads back from its report.
func TestRealInstall(t *testing.T) {
	py := "/usr/bin/python3"
	if exec.Command(py, "-m", "pip", "--version").Run() != nil {
		t.Skip("needs /usr/bin/python3 with pip")
	}
	ix := pypitest.Start(t, fixture()...)
	dir, target, home := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "reqs.txt"), []byte("# the fixture\nfixture-pkg>=1.0,\\\n<2 # a continued line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--isolated", "--disable-pip-version-check", "install", "--no-cache-dir", "--no-input", "--retries", "0",
		"--only-binary", ":all:", "--target", target, "--index-url", ix.SimpleURL(), "-r", "reqs.txt"}
	c := shims.Context{Dir: dir, Getenv: func(string) string { return "" }, TempDir: t.TempDir()}
	p, err := Plan(args, c)
	if err != nil || p == nil {
		t.Fatalf("Plan(%q) = %v, %v", args, p, err)
	}
	wantReq := []shims.Request{{Name: "fixture-pkg", Spec: ">=1.0,<2", Registry: ix.SimpleURL(), Origin: "reqs.txt:2"}}
	if !reflect.DeepEqual(p.Requests, wantReq) {
		t.Errorf("Plan(%q).Requests = %+v, want %+v", args, p.Requests, wantReq)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{"-m", "pip"}, p.Args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8", "PYTHONNOUSERSITE=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pip %q: %v\n%s", p.Args, err, out)
	}
	got, err := p.Collect(0)
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	want := []shims.Package{
		{Name: "fixture-pkg", Version: "1.5", SourceURL: ix.Files.URL + pypitest.FilePath("fixture-pkg", pypitest.WheelName("fixture-pkg", "1.5")),
			Hash: wheelHash("fixture-pkg", "1.5"), Direct: true, Requested: ">=1.0,<2"},
		{Name: "Fixture_Dep", Version: "0.1", SourceURL: ix.Files.URL + pypitest.FilePath("Fixture_Dep", pypitest.WheelName("Fixture_Dep", "0.1")),
			Hash: wheelHash("Fixture_Dep", "0.1"), RequestedBy: "fixture-pkg"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Collect = %+v, want %+v", got, want)
	}
}
