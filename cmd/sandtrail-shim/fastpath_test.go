package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/shims"
	"github.com/sandtrail/sandtrail/shims/front"
)

// hostile is a working directory and environment that give every planner
// something to find: manifests with dependencies, lockfiles, requirement
// files, npmrc and pip.conf naming another registry, and cargo aliases
// of every command word (in config.toml and CARGO_ALIAS_*) that install.
func hostile(t testing.TB) shims.Context {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"package.json":         `{"name":"p","version":"1.0.0","dependencies":{"left-pad":"^1.3.0"},"scripts":{"preinstall":"x"}}`,
		"package-lock.json":    `{"name":"p","lockfileVersion":3,"packages":{"":{"dependencies":{"left-pad":"^1.3.0"}}}}`,
		".npmrc":               "registry=http://registry.invalid/\n",
		"requirements.txt":     "requests==2.31.0\n",
		"pip.conf":             "[global]\nindex-url = http://pypi.invalid/simple\n",
		"Cargo.toml":           "[package]\nname = \"p\"\nversion = \"0.1.0\"\n\n[dependencies]\nserde = \"1\"\n",
		".cargo/config.toml":   "[alias]\nhelp = \"install evil\"\nversion = \"install evil\"\nlist = \"install evil\"\nb = \"build\"\n",
		"home/.cargo/.keep":    "",
		"home/.config/pip/pip": "",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{
		"HOME": filepath.Join(dir, "home"), "CARGO_HOME": filepath.Join(dir, "home/.cargo"),
		"CARGO_ALIAS_HELP": "install evil", "CARGO_ALIAS_LIST": "install evil", "CARGO_ALIAS_V": "install evil",
		"npm_config_registry": "http://registry.invalid/", "PIP_CONFIG_FILE": filepath.Join(dir, "pip.conf"),
		"PIP_INDEX_URL": "http://pypi.invalid/simple",
	}
	environ := func() []string {
		var out []string
		for k, v := range env {
			out = append(out, k+"="+v)
		}
		return out
	}
	return shims.Context{Dir: dir, Getenv: func(k string) string { return env[k] }, Environ: environ,
		Mirror: "http://127.0.0.1:8480", TempDir: filepath.Join(dir, "tmp")}
}

// trailing are arguments put after a fast-path form that ends in "*":
// none of them may make the planner plan the call.
var trailing = [][]string{nil, {"x"}, {"install"}, {"i", "x"}, {"exec", "x"}, {"--global"}, {"-g"},
	{"--registry=http://registry.invalid/"}, {"--", "install", "x"}, {"-r", "requirements.txt"},
	{"git+https://example.invalid/x.git"}, {"@s/p@1"}, {"-o", "APT::Get::Assume-Yes=1"}, {"--pre", "install"},
	{"add", "serde"}, {"build"}, {"ci"}, {"-e", "."}, {"--index-url", "http://pypi.invalid/simple", "x"}}

// installs are calls that the fast path must leave to the full shim.
var installs = map[string][][]string{
	"npm": {{"install"}, {"i", "x"}, {"ci"}, {"update"}, {"exec", "x"}, {"x"}, {"run", "build"}, {"test"},
		{"--version", "install", "x"}, {"-v", "i"}, {"--registry", "http://r.invalid/", "view", "x"}, {"rebuild"},
		{"pack", "x"}, {"cache", "add", "x"}, {"link"}, {"init", "x"}, {"create", "x"}, {"audit", "fix"},
		{"version", "patch"}, {"VIEW", "x"}, {"view"[:3], "x"}, {"--help", "install"}, {"help"[:1]}},
	"npx": {{"--version"}, {"-v"}, {"x"}, {"--help"}},
	"pip": {{"install", "x"}, {"download", "x"}, {"wheel", "x"}, {"--version", "install", "x"},
		{"-q", "list"}, {"--isolated", "show", "x"}, {"check", "x"}, {"list"[:2]}},
	"cargo": {{"build"}, {"install", "x"}, {"add", "x"}, {"help"}, {"version"}, {"--version", "build"},
		{"+nightly", "--version"}, {"-V", "install", "x"}, {"--list", "b"}, {"b"}, {"list"}, {"run"}},
	"apt-get": {{"install", "x"}, {"update"}, {"reinstall", "x"}, {"upgrade"}, {"source", "x"}, {"download", "x"},
		{"-y", "install", "x"}, {"--version", "install"}, {"-o", "Debug::X=1", "list"}, {"moo"}},
}

// TestFastPathAgreesWithPlans: every call the fast path execs straight
// through (front.ReadOnly) is one its manager's planner, in a directory
// and environment full of manifests, lockfiles, other registries and
// aliases, plans as no install and does not refuse; and the calls that
// install, fetch, build, run code or could be aliased are never on it.
func TestFastPathAgreesWithPlans(t *testing.T) {
	c := hostile(t)
	for _, m := range managers {
		for _, args := range fastCalls(m.Name) {
			if !front.ReadOnly(m.Name, args) {
				continue
			}
			p, err := m.Plan(args, c)
			if p != nil || err != nil {
				t.Errorf("%s %q takes the fast path, but its planner gives plan %v, error %v: the shim would check or refuse it",
					m.Name, args, p != nil, err)
			}
		}
	}
	for name, calls := range installs {
		for _, args := range calls {
			if front.ReadOnly(name, args) {
				t.Errorf("front.ReadOnly(%q, %q) = true, want false: the full shim must plan it", name, args)
			}
		}
	}
	for _, name := range []string{"npm", "pip", "cargo", "apt-get"} {
		if front.ReadOnly(name, []string{"--version", "x"}) || !front.ReadOnly(name, []string{"--version"}) {
			t.Errorf("%s --version: the fast path takes it only alone", name)
		}
	}
}

// fastCalls are the calls to check for name: each form of its allowlist,
// those ending in "*" with each of trailing, and its installs.
func fastCalls(name string) [][]string {
	var out [][]string
	for _, form := range front.Forms(name) {
		words := form
		if n := len(form); n > 0 && form[n-1] == "*" {
			words = form[:n-1]
			for _, rest := range trailing {
				out = append(out, append(slices.Clone(words), rest...))
			}
		}
		out = append(out, slices.Clone(words))
	}
	return append(out, installs[name]...)
}

// TestFastPathCommands: the fast path has an allowlist only for commands
// the shim stands in for, and each of them is one of the registry's.
func TestFastPathCommands(t *testing.T) {
	for _, c := range front.Commands() {
		if !slices.ContainsFunc(managers, func(m shims.Manager) bool { return m.Name == c }) {
			t.Errorf("the fast path has an allowlist for %q, which the shim does not stand in for", c)
		}
		if len(front.Forms(c)) == 0 {
			t.Errorf("front.Forms(%q) is empty", c)
		}
	}
	for _, m := range managers {
		if !slices.Contains(front.Commands(), m.Name) && len(front.Forms(m.Name)) > 0 {
			t.Errorf("%s has an allowlist but is not in front.Commands", m.Name)
		}
	}
	if strings.Join(front.Commands(), " ") == "" {
		t.Error("front.Commands() is empty")
	}
}

// FuzzFastPathAgreesWithPlans: whatever the arguments, a call the fast
// path takes is one its manager's planner plans as no install, in the
// hostile directory and environment. The input is a command and its
// arguments, NUL-separated.
func FuzzFastPathAgreesWithPlans(f *testing.F) {
	for _, m := range managers {
		for _, args := range fastCalls(m.Name) {
			f.Add(strings.Join(append([]string{m.Name}, args...), "\x00"))
		}
	}
	c := hostile(f)
	f.Fuzz(func(t *testing.T, in string) {
		argv := strings.Split(in, "\x00")
		i := slices.IndexFunc(managers, func(m shims.Manager) bool { return m.Name == argv[0] })
		if i < 0 || !front.ReadOnly(argv[0], argv[1:]) {
			return
		}
		if p, err := managers[i].Plan(argv[1:], c); p != nil || err != nil {
			t.Errorf("%s %q takes the fast path, but its planner gives plan %v, error %v", argv[0], argv[1:], p != nil, err)
		}
	})
}
