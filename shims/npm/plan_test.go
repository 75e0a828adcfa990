package npm

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
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
		{Name: "a", Version: "1.1.0", SourceURL: "u/a2", Hash: "i2", Direct: true, Requested: "^1", Path: "node_modules/a"},
		{Name: "c", Version: "3.0.0", SourceURL: "u/c", Hash: "ic", RequestedBy: "a", RequiredBy: []string{"a"}, InstallScripts: []string{"hasInstallScript"}, Path: "node_modules/a/node_modules/c"},
		{Name: "real", Version: "1.0.0", SourceURL: "u/r", Hash: "ir", Direct: true, Requested: "1", Path: "node_modules/al"},
		{Name: "ln", Version: "0.1.0", SourceURL: "file:../ln", Direct: true, Requested: "file:../ln", Path: "node_modules/ln"},
		{Name: "d", Version: "4.0.0", SourceURL: "u/d", Hash: "id", RequestedBy: "c", RequiredBy: []string{"c", "real"}, Path: "node_modules/d"},
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
	want := []shims.Package{{Name: "cowsay", Version: "1.2.0", SourceURL: "u", Hash: "i", Direct: true, Requested: "1", Path: "node_modules/cowsay"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Collect = %+v, %v, want %+v", got, err, want)
	}
}

// TestReportBundled: a bundled entry (inBundle) names the nearest
// enclosing package that is not itself bundled, whose tarball carried it;
// a copy bundled by the root or a workspace folder, which is not an
// artifact, names none.
func TestReportBundled(t *testing.T) {
	l, err := parseLock([]byte(`{"packages":{"":{"dependencies":{"carrier":"1","@s/c":"2"},"bundleDependencies":["own"]},
		"node_modules/carrier":{"version":"1.0.0","resolved":"u/c","integrity":"ic","bundleDependencies":["inner"],"dependencies":{"inner":"1.0.0"}},
		"node_modules/carrier/node_modules/inner":{"version":"1.0.0","inBundle":true,"dependencies":{"deep":"*"}},
		"node_modules/carrier/node_modules/deep":{"version":"3.0.0","inBundle":true},
		"node_modules/carrier/node_modules/inner/node_modules/deeper":{"version":"4.0.0","inBundle":true},
		"node_modules/@s/c":{"version":"2.0.0","resolved":"u/s","integrity":"is","bundleDependencies":true,"dependencies":{"x":"1"}},
		"node_modules/@s/c/node_modules/x":{"version":"1.0.0","inBundle":true},
		"node_modules/own":{"version":"0.1.0","inBundle":true},
		"node_modules/inner":{"version":"1.0.0","resolved":"u/i","integrity":"ii"},
		"ws/node_modules/w":{"version":"5.0.0","inBundle":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"node_modules/carrier":                                        "",
		"node_modules/carrier/node_modules/inner":                     "pkg:npm/carrier@1.0.0",
		"node_modules/carrier/node_modules/deep":                      "pkg:npm/carrier@1.0.0",
		"node_modules/carrier/node_modules/inner/node_modules/deeper": "pkg:npm/carrier@1.0.0",
		"node_modules/@s/c":                                           "",
		"node_modules/@s/c/node_modules/x":                            "pkg:npm/%40s/c@2.0.0",
		"node_modules/own":                                            "",
		"node_modules/inner":                                          "",
		"ws/node_modules/w":                                           "",
	}
	got := report(t.TempDir(), installed(l), l, nil, nil)
	if len(got) != len(want) {
		t.Errorf("report = %+v, want %d packages", got, len(want))
	}
	for _, p := range got {
		if w, ok := want[p.Path]; !ok || p.BundledIn != w {
			t.Errorf("report[%s].BundledIn = %q, want %q", p.Path, p.BundledIn, w)
		}
	}
	if !l["node_modules/@s/c"].bundles("x") || l["node_modules/@s/c"].bundles("y") || !l["node_modules/carrier"].bundles("inner") {
		t.Errorf("bundles: bundleDependencies true and a list not read as they are")
	}
}

// TestRegistryFromEnvAnyCase: npm reads npm_config_* in any letter case,
// the last variable winning; so does the planner, and the mirror the
// session set in lower case does not hide a later one the agent set.
func TestRegistryFromEnvAnyCase(t *testing.T) {
	const evil = "http://127.0.0.1:9/evil/"
	mirror := "npm_config_registry=http://127.0.0.1:8480/npm/"
	for _, tt := range []struct {
		name    string
		environ []string
		want    string
	}{
		{"lower", []string{"npm_config_registry=" + evil}, evil},
		{"upper", []string{"NPM_CONFIG_REGISTRY=" + evil}, evil},
		{"mixed, after the mirror", []string{mirror, "Npm_Config_Registry=" + evil}, evil},
		{"upper, after the mirror", []string{mirror, "NPM_CONFIG_REGISTRY=" + evil}, evil},
		{"the mirror, after the agent's", []string{"Npm_Config_Registry=" + evil, mirror}, ""},
		{"an empty one is not a value", []string{"npm_CONFIG_registry=" + evil, "NPM_config_REGISTRY="}, evil},
		{"another key", []string{"npm_config_registry_x=" + evil}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for _, kv := range tt.environ {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			c := ctxIn(t.TempDir(), env)
			c.Environ = func() []string { return tt.environ }
			p, err := Plan([]string{"install", "a"}, c)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Requests) != 1 || p.Requests[0].Registry != tt.want {
				t.Errorf("Plan(install a) with %q: requests %+v, want registry %q", tt.environ, p.Requests, tt.want)
			}
		})
	}
}

// TestLockfileSources: npm ci fetches each package at its lockfile's
// resolved URL, so the plan checks each registry and other source the
// lockfile names, once each; links, file: entries and the mirror's own
// URLs fetch nothing from elsewhere.
func TestLockfileSources(t *testing.T) {
	dir := t.TempDir()
	pj := `{"name":"p","version":"1.0.0","dependencies":{"a":"1.0.0"}}`
	lock := `{"lockfileVersion":3,"packages":{
		"":{"name":"p","dependencies":{"a":"1.0.0"}},
		"node_modules/a":{"version":"1.0.0","resolved":"https://registry.npmjs.org/a/-/a-1.0.0.tgz"},
		"node_modules/b":{"version":"1.0.0","resolved":"https://registry.npmjs.org/b/-/b-1.0.0.tgz"},
		"node_modules/a/node_modules/@s/evil":{"version":"1.0.0","resolved":"http://127.0.0.1:9/@s/evil/-/evil-1.0.0.tgz"},
		"node_modules/alias":{"name":"real","version":"1.0.0","resolved":"http://127.0.0.1:9/real/-/real-1.0.0.tgz"},
		"node_modules/t":{"version":"1.0.0","resolved":"https://example.invalid/t.tgz"},
		"node_modules/g":{"version":"1.0.0","resolved":"git+ssh://git@example.invalid/g.git#0123"},
		"node_modules/m":{"version":"1.0.0","resolved":"http://127.0.0.1:8480/npm/m/-/m-1.0.0.tgz"},
		"node_modules/f":{"version":"1.0.0","resolved":"file:../f"},
		"node_modules/w":{"resolved":"packages/w","link":true}}}`
	for name, body := range map[string]string{"package.json": pj, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := Plan([]string{"ci"}, ctxIn(dir, nil))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range p.Requests {
		if r.Origin == "package-lock.json" {
			got = append(got, r.Registry+r.Source)
		}
	}
	want := []string{"https://registry.npmjs.org/", "http://127.0.0.1:9/",
		"git+ssh://git@example.invalid/g.git#0123", "https://example.invalid/t.tgz"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Plan(ci) lockfile requests = %q, want %q", got, want)
	}
}
