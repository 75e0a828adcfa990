package npm

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sandtrail/sandtrail/shims"
)

func ctxIn(dir string, env map[string]string) shims.Context {
	return shims.Context{Dir: dir, Getenv: func(k string) string { return env[k] }, Mirror: "http://127.0.0.1:8480"}
}

func TestPlanRequests(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []shims.Request // nil: no plan
	}{
		{"version", []string{"--version"}, nil},
		{"ls", []string{"ls"}, nil},
		{"run", []string{"run", "build"}, nil},
		{"config", []string{"config", "set", "registry", "x"}, nil},
		{"install", []string{"install", "left-pad@^1.3.0"}, []shims.Request{{Name: "left-pad", Spec: "^1.3.0", Origin: "argv"}}},
		{"exact", []string{"i", "left-pad@1.3.0"}, []shims.Request{{Name: "left-pad", Spec: "1.3.0", Exact: "1.3.0", Origin: "argv"}}},
		{"exact v", []string{"add", "a@=v1.2.3"}, []shims.Request{{Name: "a", Spec: "=v1.2.3", Exact: "1.2.3", Origin: "argv"}}},
		{"typo alias", []string{"isntall", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"abbrev", []string{"instal", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"camel", []string{"installTest", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"unique prefix", []string{"install-t", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"scoped tag", []string{"install", "@s/p@next"}, []shims.Request{{Name: "@s/p", Spec: "next", Origin: "argv"}}},
		{"alias", []string{"install", "lp@npm:left-pad@^1"}, []shims.Request{{Name: "left-pad", Spec: "^1", Origin: "argv"}}},
		{"git", []string{"install", "git+https://example.invalid/u/r.git"}, []shims.Request{{Source: "git+https://example.invalid/u/r.git", Origin: "argv"}}},
		{"github short", []string{"install", "u/r"}, []shims.Request{{Source: "u/r", Origin: "argv"}}},
		{"github:", []string{"install", "github:u/r#v1"}, []shims.Request{{Source: "github:u/r#v1", Origin: "argv"}}},
		{"scp git", []string{"install", "git@example.invalid:u/r.git"}, []shims.Request{{Source: "git@example.invalid:u/r.git", Origin: "argv"}}},
		{"tarball", []string{"install", "https://example.invalid/x.tgz"}, []shims.Request{{Source: "https://example.invalid/x.tgz", Origin: "argv"}}},
		{"path", []string{"install", "./dir"}, []shims.Request{{Source: "./dir", Origin: "argv"}}},
		{"file", []string{"install", "x@file:../x"}, []shims.Request{{Name: "x", Source: "file:../x", Origin: "argv"}}},
		{"registry flag", []string{"install", "--registry", "https://r.example.invalid/", "a"}, []shims.Request{{Name: "a", Registry: "https://r.example.invalid/", Origin: "argv"}}},
		{"registry eq", []string{"install", "a", "--registry=https://r.example.invalid/"}, []shims.Request{{Name: "a", Registry: "https://r.example.invalid/", Origin: "argv"}}},
		{"registry abbrev", []string{"--regi", "https://r.example.invalid/", "install", "a"}, []shims.Request{{Name: "a", Registry: "https://r.example.invalid/", Origin: "argv"}}},
		{"reg shorthand", []string{"--reg=https://r.example.invalid/", "install", "a"}, []shims.Request{{Name: "a", Registry: "https://r.example.invalid/", Origin: "argv"}}},
		{"scope registry", []string{"install", "--@s:registry=https://s.example.invalid/", "@s/p", "q"}, []shims.Request{{Name: "@s/p", Registry: "https://s.example.invalid/", Origin: "argv"}, {Name: "q", Origin: "argv"}}},
		{"scope registry no eq", []string{"install", "--@s:registry", "https://s.example.invalid/x.tgz"}, []shims.Request{{Source: "https://s.example.invalid/x.tgz", Origin: "argv"}}},
		{"double dash", []string{"--", "install", "--registry", "a"}, []shims.Request{{Name: "--registry", Origin: "argv"}, {Name: "a", Origin: "argv"}}},
		{"flags first", []string{"-gD", "--save-exact", "install", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"prefix value", []string{"install", "-C", "install", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"workspace value", []string{"install", "-w", "pkg", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"bool takes true", []string{"install", "--save", "true", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"no- bool", []string{"install", "--no-registry", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"unknown flag", []string{"install", "--frobnicate", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"string opt no dash", []string{"install", "--tag", "-x", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"update", []string{"up", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"exec", []string{"x", "cowsay@1.0.0", "hi"}, []shims.Request{{Name: "cowsay", Spec: "1.0.0", Exact: "1.0.0", Origin: "argv"}}},
		{"exec package", []string{"exec", "--package=a", "--package", "b", "--", "cmd"}, []shims.Request{{Name: "a", Origin: "argv"}, {Name: "b", Origin: "argv"}}},
		{"init", []string{"init", "vite@5"}, []shims.Request{{Name: "create-vite", Spec: "5", Origin: "argv"}}},
		{"create scope", []string{"create", "@s"}, []shims.Request{{Name: "@s/create", Origin: "argv"}}},
		{"init alone", []string{"init", "-y"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Plan(tc.args, ctxIn(t.TempDir(), nil))
			if err != nil {
				t.Fatalf("Plan(%q) error %v", tc.args, err)
			}
			if tc.want == nil {
				if p != nil {
					t.Errorf("Plan(%q) = %+v, want no plan", tc.args, p.Requests)
				}
				return
			}
			if p == nil || !reflect.DeepEqual(p.Requests, tc.want) {
				t.Errorf("Plan(%q) = %+v, want %+v", tc.args, p, tc.want)
			}
		})
	}
}

func TestPlanNpx(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []shims.Request
	}{
		{"plain", []string{"cowsay", "--registry", "x"}, []shims.Request{{Name: "cowsay", Origin: "argv"}}},
		{"yes", []string{"-y", "a@1.0.0"}, []shims.Request{{Name: "a", Spec: "1.0.0", Exact: "1.0.0", Origin: "argv"}}},
		{"-p", []string{"-p", "a", "-p=b", "cmd"}, []shims.Request{{Name: "a", Origin: "argv"}, {Name: "b", Origin: "argv"}}},
		{"package=", []string{"--package=@s/a@2", "cmd"}, []shims.Request{{Name: "@s/a", Spec: "2", Origin: "argv"}}},
		{"registry", []string{"--registry", "https://r.example.invalid/", "a"}, []shims.Request{{Name: "a", Registry: "https://r.example.invalid/", Origin: "argv"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanNpx(tc.args, ctxIn(t.TempDir(), map[string]string{"HOME": t.TempDir()}))
			if err != nil || p == nil || !reflect.DeepEqual(p.Requests, tc.want) {
				t.Errorf("PlanNpx(%q) = %+v, %v, want %+v", tc.args, p, err, tc.want)
			}
		})
	}
}

// TestPackageJSON: npm install with no spec asks for package.json's
// dependencies, a git or tarball value as a Source request; registries
// come from .npmrc (TestRegistryPrecedence: and from the environment).
func TestPackageJSON(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "package.json"), `{"dependencies":{"a":"^1","g":"git+https://example.invalid/g.git","t":"https://example.invalid/t.tgz"},
		"devDependencies":{"d":"1.0.0","@s/x":"npm:real@2"},"optionalDependencies":{"o":"u/r"}}`)
	write(t, filepath.Join(dir, ".npmrc"), "; comment\n@s:registry = ${SREG}\nregistry=\"https://r.example.invalid/\"\n")
	sub := filepath.Join(dir, "src")
	os.Mkdir(sub, 0o755)
	p, err := Plan([]string{"ci"}, ctxIn(sub, map[string]string{"SREG": "https://s.example.invalid/"}))
	if err != nil || p == nil {
		t.Fatalf("Plan(ci) = %v, %v", p, err)
	}
	want := []shims.Request{
		{Name: "real", Spec: "2", Registry: "https://r.example.invalid/", Origin: "package.json"},
		{Name: "a", Spec: "^1", Registry: "https://r.example.invalid/", Origin: "package.json"},
		{Name: "d", Spec: "1.0.0", Exact: "1.0.0", Registry: "https://r.example.invalid/", Origin: "package.json"},
		{Name: "g", Source: "git+https://example.invalid/g.git", Origin: "package.json"},
		{Name: "o", Source: "u/r", Origin: "package.json"},
		{Name: "t", Source: "https://example.invalid/t.tgz", Origin: "package.json"},
	}
	if !reflect.DeepEqual(p.Requests, want) {
		t.Errorf("Plan(ci) = %+v, want %+v", p.Requests, want)
	}
	write(t, filepath.Join(dir, "package.json"), `{"dependencies":`)
	if _, err := Plan([]string{"install"}, ctxIn(dir, nil)); err == nil {
		t.Error("Plan(install) with a broken package.json: no error")
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReport: nested entries, requested_by naming the parents (by
// node_modules resolution: c's d is the top-level one), aliases, links,
// changed-only.
func TestReport(t *testing.T) {
	before := `{"packages":{"":{"dependencies":{"a":"^1"}},"node_modules/a":{"version":"1.0.0","resolved":"u/a1","integrity":"i1","dependencies":{"b":"*"}},
		"node_modules/b":{"version":"1.0.0","resolved":"u/b","integrity":"ib"}}}`
	after := `{"packages":{"":{"dependencies":{"a":"^1","al":"npm:real@1","ln":"file:../ln"}},
		"node_modules/a":{"version":"1.1.0","resolved":"u/a2","integrity":"i2","dependencies":{"b":"*","c":"*"}},
		"node_modules/b":{"version":"1.0.0","resolved":"u/b","integrity":"ib"},
		"node_modules/a/node_modules/c":{"version":"3.0.0","resolved":"u/c","integrity":"ic","dependencies":{"d":"*"},"hasInstallScript":true},
		"node_modules/d":{"version":"4.0.0","resolved":"u/d","integrity":"id"},
		"node_modules/al":{"name":"real","version":"1.0.0","resolved":"u/r","integrity":"ir","dependencies":{"d":"^4"}},
		"node_modules/ln":{"resolved":"../ln","link":true},"../ln":{"version":"0.1.0"}}}`
	bl, err := parseLock([]byte(before))
	if err != nil {
		t.Fatal(err)
	}
	al, err := parseLock([]byte(after))
	if err != nil {
		t.Fatal(err)
	}
	ws := []want{{req: shims.Request{Name: "real", Spec: "1"}, install: "al"}}
	got := report(t.TempDir(), changed(bl, al), al, ws, manifest{"a": "^1"})
	wantPk := []shims.Package{
		{Name: "a", Version: "1.1.0", SourceURL: "u/a2", Hash: "i2", Direct: true, Requested: "^1"},
		{Name: "c", Version: "3.0.0", SourceURL: "u/c", Hash: "ic", RequestedBy: "a", InstallScripts: []string{"hasInstallScript"}},
		{Name: "real", Version: "1.0.0", SourceURL: "u/r", Hash: "ir", Direct: true, Requested: "1"},
		{Name: "ln", Version: "0.1.0", SourceURL: "file:../ln", Direct: true, Requested: "file:../ln"},
		{Name: "d", Version: "4.0.0", SourceURL: "u/d", Hash: "id", RequestedBy: "c, real"},
	}
	byName := map[string]shims.Package{}
	for _, p := range got {
		byName[p.Name] = p
	}
	if len(got) != len(wantPk) {
		t.Errorf("report = %+v, want %d packages", got, len(wantPk))
	}
	for _, w := range wantPk {
		if g := byName[w.Name]; !reflect.DeepEqual(g, w) {
			t.Errorf("report[%s] = %+v, want %+v", w.Name, g, w)
		}
	}
}

// TestNpxCollect: a new npx cache folder's lockfile is read back.
func TestNpxCollect(t *testing.T) {
	home := t.TempDir()
	p, err := PlanNpx([]string{"--yes", "cowsay@1"}, ctxIn(t.TempDir(), map[string]string{"HOME": home}))
	if err != nil || p == nil {
		t.Fatalf("PlanNpx = %v, %v", p, err)
	}
	d := filepath.Join(home, ".npm", "_npx", "abc")
	os.MkdirAll(d, 0o755)
	write(t, filepath.Join(d, "package-lock.json"), `{"packages":{"":{"dependencies":{"cowsay":"^1"}},"node_modules/cowsay":{"version":"1.2.0","resolved":"u","integrity":"i"}}}`)
	got, err := p.Collect(0)
	want := []shims.Package{{Name: "cowsay", Version: "1.2.0", SourceURL: "u", Hash: "i", Direct: true, Requested: "1"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Collect = %+v, %v, want %+v", got, err, want)
	}
}
