package npm

import (
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/shims"
)

// FuzzPlan: no argv makes the planner panic, and an install command with
// a plain package name always plans a request for it.
func FuzzPlan(f *testing.F) {
	for _, s := range []string{"install left-pad@^1", "-g i --prefix=/x a", "--reg http://x a", "x -p a -- b", "init @s",
		"-- ci", "--no-save --save true add a@npm:b@1", "exec --package=git+ssh://x/y", "-C", "--=x", "audit fix --force", "rb", "pack git+https://x/y", "cache add a", "diff --diff=a@1", "--globalconfig=/x i a"} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, " ")
		c := shims.Context{Dir: dir, Getenv: func(string) string { return "" }}
		Plan(args, c)
		PlanNpx(args, c)
		p, err := Plan(append([]string{"install", "zzpkg"}, args...), c)
		if err != nil || p == nil {
			t.Fatalf("Plan(install zzpkg %q) = %v, %v, want a plan", args, p, err)
		}
		found := false
		for _, r := range p.Requests {
			found = found || r.Name == "zzpkg"
		}
		if !found {
			t.Errorf("Plan(install zzpkg %q) = %+v, want zzpkg requested", args, p.Requests)
		}
	})
}

// FuzzLock: parsing and diffing any lockfile neither panics nor loops,
// and only an inBundle entry is reported bundled.
func FuzzLock(f *testing.F) {
	f.Add([]byte(`{"packages":{"":{"dependencies":{"a":"1"}},"node_modules/a":{"version":"1","dependencies":{"b":"*"}},"node_modules/a/node_modules/b":{"version":"2","dependencies":{"a":"*"}}}}`))
	f.Add([]byte(`{"packages":{"node_modules/x":{"link":true,"resolved":"node_modules/x"}}}`))
	f.Add([]byte(`{"packages":{"node_modules/":"s"}}`))
	f.Add([]byte(`{"packages":{"node_modules/c":{"version":"1","bundleDependencies":["i"]},"node_modules/c/node_modules/i":{"version":"1","inBundle":true},"node_modules/d":{"bundledDependencies":true,"dependencies":{"i":"1"}},"node_modules/d/node_modules/i/node_modules/j":{"inBundle":true}}}`))
	f.Add([]byte(`{"packages":{"node_modules/c":{"bundleDependencies":{"x":1}},"x/node_modules/i":{"inBundle":true}}}`))
	f.Add([]byte(`{"packages":{"node_modules/@s/a":{"resolved":"http://h/@s/a/-/a-1.tgz"},"node_modules/b":{"name":"c","resolved":"https://h/c/-/c-1.tgz"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parseLock(b)
		if err != nil {
			return
		}
		for _, p := range report(t.TempDir(), installed(l), l, []want{{install: "a"}, {req: shims.Request{Source: "x"}}}, manifest{"b": "1"}) {
			if p.BundledIn != "" && !l[p.Path].InBundle {
				t.Errorf("report[%s] is bundled in %s, but its entry is not inBundle", p.Path, p.BundledIn)
			}
		}
		s := &session{c: shims.Context{Mirror: "http://127.0.0.1:8480"}}
		for _, r := range s.lockRequests(l) {
			if (r.Registry == "") == (r.Source == "") {
				t.Fatalf("lockRequests: %+v names neither a registry nor a source, or both", r)
			}
		}
	})
}

// FuzzManifest: package.json and .npmrc parsing never panics.
func FuzzManifest(f *testing.F) {
	f.Add([]byte(`{"dependencies":{"a":"^1","b":{"x":1}},"devDependencies":null}`))
	f.Add([]byte("registry=${X}\n@s:registry=\\${Y}\n"))
	f.Add([]byte("prefix=/p\nglobalconfig = \"${G}\"\nuserconfig=~/u\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := parseManifest(b); err == nil {
			s := &session{cfg: &config{vals: map[string][]string{}}, c: shims.Context{Getenv: func(string) string { return "" }}}
			s.manifestWants(m, nil)
		}
		parseNpmrc(b, func(string) string { return "v" })
	})
}
