package npm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/shims"
)

// TestPlanTreeCommands: the commands that reify or rebuild the tree from
// package.json and the lockfile (audit fix, rebuild) and those that fetch
// specs (pack, cache add, diff) are planned.
func TestPlanTreeCommands(t *testing.T) {
	evil := []shims.Request{{Name: "evil", Source: "file:../evil", Origin: "package.json"}, {Name: "ok", Spec: "^1", Origin: "package.json"}}
	tests := []struct {
		name    string
		args    []string
		want    []shims.Request // nil: no plan
		collect bool
	}{
		{"audit fix", []string{"audit", "fix"}, evil, true},
		{"audit fix force", []string{"audit", "fix", "--force"}, evil, true},
		{"audit fix flags first", []string{"--force", "audit", "--json", "fix"}, evil, true},
		{"audit alone", []string{"audit"}, nil, false},
		{"audit signatures", []string{"audit", "signatures"}, nil, false},
		{"rebuild", []string{"rebuild"}, evil, true},
		{"rb", []string{"rb", "ok"}, evil, true},
		{"pack git", []string{"pack", "git+https://example.invalid/r.git"}, []shims.Request{{Source: "git+https://example.invalid/r.git", Origin: "argv"}}, false},
		{"pack name", []string{"pack", "left-pad@1.3.0", "--dry-run"}, []shims.Request{{Name: "left-pad", Spec: "1.3.0", Exact: "1.3.0", Origin: "argv"}}, false},
		{"pack alone", []string{"pack"}, nil, false},
		{"cache add", []string{"cache", "add", "a@1", "u/r"}, []shims.Request{{Name: "a", Spec: "1", Origin: "argv"}, {Source: "u/r", Origin: "argv"}}, false},
		{"cache ls", []string{"cache", "ls"}, nil, false},
		{"diff", []string{"diff", "--diff=git+https://example.invalid/r.git", "--diff", "b@2"}, []shims.Request{{Source: "git+https://example.invalid/r.git", Origin: "argv"}, {Name: "b", Spec: "2", Origin: "argv"}}, false},
		{"diff version", []string{"diff", "--diff=1.0.0"}, nil, false},
		{"explore", []string{"explore", "ok"}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "package.json"), `{"dependencies":{"evil":"file:../evil","ok":"^1"}}`)
			write(t, filepath.Join(dir, "package-lock.json"), `{"lockfileVersion":3,"packages":{"":{"dependencies":{"evil":"file:../evil"}},"node_modules/evil":{"resolved":"../evil","link":true}}}`)
			p, err := Plan(tc.args, ctxIn(dir, map[string]string{"HOME": t.TempDir()}))
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
				t.Fatalf("Plan(%q) = %+v, want %+v", tc.args, p, tc.want)
			}
			if (p.Collect != nil) != tc.collect {
				t.Errorf("Plan(%q).Collect set = %v, want %v", tc.args, p.Collect != nil, tc.collect)
			}
		})
	}
}

// TestConfiguredRegistry: a registry set in the global npmrc (found
// through globalconfig, the prefix or $PREFIX), the builtin one or the
// user's becomes the requests' Registry; the project's wins.
func TestConfiguredRegistry(t *testing.T) {
	const reg, sreg = "https://g.example.invalid/", "https://s.example.invalid/"
	tests := []struct {
		name  string
		files map[string]string // relative to a temporary root; "proj/" is the project
		env   map[string]string // ROOT is replaced by the root
		args  []string
		want  string // Registry of a and of @s/b
		wantS string
	}{
		{"globalconfig env", map[string]string{"g.rc": "registry=" + reg}, map[string]string{"npm_config_globalconfig": "ROOT/g.rc"}, nil, reg, reg},
		{"globalconfig upper env", map[string]string{"g.rc": "registry=" + reg}, map[string]string{"NPM_CONFIG_GLOBALCONFIG": "ROOT/g.rc"}, nil, reg, reg},
		{"globalconfig argv", map[string]string{"g.rc": "@s:registry=" + sreg}, nil, []string{"--globalconfig", "ROOT/g.rc"}, "", sreg},
		{"globalconfig in userconfig", map[string]string{"u.rc": "globalconfig=ROOT/g.rc", "g.rc": "registry=" + reg}, map[string]string{"npm_config_userconfig": "ROOT/u.rc"}, nil, reg, reg},
		{"prefix env", map[string]string{"pfx/etc/npmrc": "registry=" + reg}, map[string]string{"npm_config_prefix": "ROOT/pfx"}, nil, reg, reg},
		{"PREFIX", map[string]string{"pfx/etc/npmrc": "registry=" + reg}, map[string]string{"PREFIX": "ROOT/pfx"}, nil, reg, reg},
		{"prefix in project npmrc", map[string]string{"proj/.npmrc": "prefix=ROOT/pfx", "pfx/etc/npmrc": "registry=" + reg}, nil, nil, reg, reg},
		{"builtin", map[string]string{"pfx/lib/node_modules/npm/npmrc": "registry=" + reg}, map[string]string{"PREFIX": "ROOT/pfx"}, nil, reg, reg},
		{"project wins", map[string]string{"proj/.npmrc": "registry=https://p.example.invalid/", "g.rc": "registry=" + reg + "\n@s:registry=" + sreg}, map[string]string{"npm_config_globalconfig": "ROOT/g.rc"}, nil, "https://p.example.invalid/", sreg},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			os.MkdirAll(filepath.Join(root, "proj"), 0o755)
			for f, s := range tc.files {
				os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755)
				write(t, filepath.Join(root, f), strings.ReplaceAll(s, "ROOT", root))
			}
			env := map[string]string{"HOME": filepath.Join(root, "home")}
			for k, v := range tc.env {
				env[k] = strings.ReplaceAll(v, "ROOT", root)
			}
			args := []string{"install", "a", "@s/b"}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "ROOT", root))
			}
			p, err := Plan(args, ctxIn(filepath.Join(root, "proj"), env))
			if err != nil || p == nil || len(p.Requests) != 2 {
				t.Fatalf("Plan(%q) = %+v, %v", args, p, err)
			}
			if g, gs := p.Requests[0].Registry, p.Requests[1].Registry; g != tc.want || gs != tc.wantS {
				t.Errorf("Plan(%q) registries = %q, %q, want %q, %q", args, g, gs, tc.want, tc.wantS)
			}
		})
	}
}

// TestGlobalconfigRealNpm: the real npm reads the registry of the file
// that npm_config_globalconfig or the prefix names, as the planner does.
func TestGlobalconfigRealNpm(t *testing.T) {
	npm := realNpm(t)
	root := t.TempDir()
	const reg = "https://g.example.invalid/"
	os.MkdirAll(filepath.Join(root, "pfx", "etc"), 0o755)
	write(t, filepath.Join(root, "g.rc"), "registry="+reg)
	write(t, filepath.Join(root, "pfx", "etc", "npmrc"), "registry="+reg)
	for _, extra := range [][]string{{"npm_config_globalconfig=" + filepath.Join(root, "g.rc")}, {"npm_config_prefix=" + filepath.Join(root, "pfx")}} {
		env := append([]string{"PATH=/usr/bin:/bin", "HOME=" + root, "npm_config_update_notifier=false"}, extra...)
		cmd := exec.Command(npm, "config", "get", "registry")
		cmd.Dir, cmd.Env = root, env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("npm config get registry with %q: %v", extra, err)
		}
		p, err := Plan([]string{"install", "a"}, shims.Context{Dir: root, Getenv: getenvOf(env)})
		if err != nil || p == nil {
			t.Fatalf("Plan(install a) with %q = %v, %v", extra, p, err)
		}
		if got := strings.TrimSpace(string(out)); got != reg || p.Requests[0].Registry != got {
			t.Errorf("with %q: npm's registry %q, Plan's %q, want %q", extra, got, p.Requests[0].Registry, reg)
		}
	}
}

// TestNotRegularFiles: a package.json, lockfile or .npmrc that is a FIFO
// is refused (Plan returns an error) without blocking.
func TestNotRegularFiles(t *testing.T) {
	for _, name := range []string{"package.json", "package-lock.json", ".npmrc", "node_modules/.package-lock.json"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "package.json"), `{}`)
			os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755)
			os.Remove(filepath.Join(dir, name))
			if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
				t.Skipf("making a FIFO: %v", err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := Plan([]string{"install", "a"}, ctxIn(dir, nil))
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, ErrNotRegular) {
					t.Errorf("Plan(install a) with %s a FIFO: error %v, want ErrNotRegular", name, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("Plan(install a) with %s a FIFO: blocked", name)
			}
		})
	}
}

// TestRegistryPrecedence: a request's registry is the one npm uses: a
// package's @scope:registry from any place before registry from any, each
// from argv, else the environment, else the npmrc files; the mirror,
// configured, hides the places after it. The real npm agrees (npm config
// get). On the code before, the session's npm_config_registry (the
// mirror) did not hide the global npmrc install.sh wrote, whose mirror at
// another address was refused as an unknown registry; and argv's
// --registry hid an npmrc's @scope:registry, which npm uses for the
// scope's packages.
func TestRegistryPrecedence(t *testing.T) {
	const mirror, p, s, e, a = "http://127.0.0.1:8480/npm/", "https://p.example.invalid/", "https://s.example.invalid/", "https://e.example.invalid/", "https://a.example.invalid/"
	tests := []struct {
		name  string
		npmrc string // the project's
		env   map[string]string
		args  []string
		want  string // Registry of a and of @s/b
		wantS string
	}{
		{"the environment's mirror hides the npmrc", "registry=" + p, map[string]string{"npm_config_registry": mirror}, nil, "", ""},
		{"the environment over the npmrc", "registry=" + mirror, map[string]string{"npm_config_registry": e}, nil, e, e},
		{"an npmrc's scope over the environment's registry", "@s:registry=" + s, map[string]string{"npm_config_registry": mirror}, nil, "", s},
		{"an npmrc's scope over argv's registry", "@s:registry=" + s, nil, []string{"--registry=" + a}, a, s},
		{"the npmrc alone", "registry=" + p, nil, nil, p, p},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, ".npmrc"), tc.npmrc+"\n")
			env := map[string]string{"HOME": filepath.Join(dir, "home")}
			for k, v := range tc.env {
				env[k] = v
			}
			args := append(append([]string{"install"}, tc.args...), "a", "@s/b")
			pl, err := Plan(args, ctxIn(dir, env))
			if err != nil || pl == nil || len(pl.Requests) != 2 {
				t.Fatalf("Plan(%q) = %+v, %v", args, pl, err)
			}
			if g, gs := pl.Requests[0].Registry, pl.Requests[1].Registry; g != tc.want || gs != tc.wantS {
				t.Errorf("Plan(%q) registries = %q, %q, want %q, %q", args, g, gs, tc.want, tc.wantS)
			}
			npm, err := exec.LookPath("/usr/bin/npm")
			if err != nil {
				return
			}
			get := func(key string) string {
				cmd := exec.Command(npm, append([]string{"config", "get", key}, tc.args...)...)
				cmd.Dir = dir
				cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + env["HOME"], "npm_config_update_notifier=false"}
				for k, v := range tc.env {
					cmd.Env = append(cmd.Env, k+"="+v)
				}
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("npm config get %s: %v", key, err)
				}
				return strings.TrimSpace(string(out))
			}
			scoped := get("@s:registry")
			if scoped == "undefined" {
				scoped = get("registry")
			}
			for _, c := range []struct{ key, got, want string }{{"registry", get("registry"), tc.want}, {"@s:registry", scoped, tc.wantS}} {
				if c.want == "" {
					c.want = mirror // not reported: the mirror
				}
				if c.got != c.want {
					t.Errorf("the real npm's %s with %q is %q; the planner says %q", c.key, tc.args, c.got, c.want)
				}
			}
		})
	}
}
