package cargo

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/shims"
)

func ctx(dir string, env map[string]string) shims.Context {
	return shims.Context{Dir: dir, Mirror: "http://127.0.0.1:8480", Getenv: func(k string) string { return env[k] }}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPlanNoIntent(t *testing.T) {
	for _, args := range [][]string{nil, {"--version"}, {"-V"}, {"-vV"}, {"+nightly", "--version"}, {"help", "build"},
		{"search", "serde"}, {"--list"}, {"new", "x"}, {"install", "--list"}, {"--explain", "E0001"}, {"uninstall", "ripgrep"}} {
		p, err := Plan(args, ctx(t.TempDir(), nil))
		if p != nil || err != nil {
			t.Errorf("Plan(%q) = %+v, %v, want nil, nil", args, p, err)
		}
	}
}

func TestPlanArgs(t *testing.T) {
	p, err := Plan([]string{"+nightly", "fetch"}, ctx(t.TempDir(), nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"+nightly", "--config", `source.crates-io.replace-with="sandtrail-mirror"`,
		"--config", `source.sandtrail-mirror.registry="sparse+http://127.0.0.1:8480/crates/index/"`, "fetch"}
	if !reflect.DeepEqual(p.Args, want) {
		t.Errorf("Plan(+nightly fetch).Args = %q, want %q", p.Args, want)
	}
	c := ctx(t.TempDir(), nil)
	c.Mirror = ""
	if p, _ := Plan([]string{"build"}, c); p == nil || p.Args != nil {
		t.Errorf("Plan(build) without a mirror = %+v, want a plan with nil Args", p)
	}
}

func TestPlanInstall(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []shims.Request
	}{
		{name: "bare", args: []string{"install", "ripgrep"}, want: []shims.Request{{Name: "ripgrep", Origin: "argv"}}},
		{name: "at version", args: []string{"install", "ripgrep@14.1.0"}, want: []shims.Request{{Name: "ripgrep", Spec: "14.1.0", Exact: "14.1.0", Origin: "argv"}}},
		{name: "--version", args: []string{"install", "--version", "1.2.3", "a", "b"}, want: []shims.Request{
			{Name: "a", Spec: "1.2.3", Exact: "1.2.3", Origin: "argv"}, {Name: "b", Spec: "1.2.3", Exact: "1.2.3", Origin: "argv"}}},
		{name: "--vers= range", args: []string{"install", "--vers=^1.2", "a"}, want: []shims.Request{{Name: "a", Spec: "^1.2", Origin: "argv"}}},
		{name: "git", args: []string{"-q", "install", "--git", "https://example.invalid/x.git", "--branch", "main", "x"},
			want: []shims.Request{{Name: "x", Source: "https://example.invalid/x.git", Origin: "argv"}}},
		{name: "git= no name", args: []string{"install", "--git=https://example.invalid/x.git"},
			want: []shims.Request{{Source: "https://example.invalid/x.git", Origin: "argv"}}},
		{name: "path", args: []string{"install", "--path", "."}, want: []shims.Request{{Source: "path:.", Origin: "argv"}}},
		{name: "registry", args: []string{"install", "--registry", "corp", "tool", "--locked", "-j4"}, want: []shims.Request{{Name: "tool", Registry: "corp", Origin: "argv"}}},
		{name: "index", args: []string{"install", "--index", "sparse+https://example.invalid/", "tool"}, want: []shims.Request{{Name: "tool", Registry: "sparse+https://example.invalid/", Origin: "argv"}}},
		{name: "flags before", args: []string{"--locked", "--color", "never", "-Zx", "install", "-F", "a,b", "tool"}, want: []shims.Request{{Name: "tool", Origin: "argv"}}},
		{name: "config registry", args: []string{"--config", "registries.corp.index='sparse+https://example.invalid/'", "install", "tool"}, want: []shims.Request{
			{Registry: "sparse+https://example.invalid/", Origin: "argv --config [registries.corp]"}, {Name: "tool", Origin: "argv"}}},
		{name: "config net", args: []string{"--config", "http.proxy='http://example.invalid'", "install", "tool"}, want: []shims.Request{
			{Registry: "argv --config http", Origin: "argv --config"}, {Name: "tool", Origin: "argv"}}},
		{name: "harmless config", args: []string{"--config", "build.jobs=2", "install", "tool"}, want: []shims.Request{{Name: "tool", Origin: "argv"}}},
		{name: "after --", args: []string{"install", "tool", "--", "other"}, want: []shims.Request{{Name: "tool", Origin: "argv"}}},
		{name: "no crate", args: []string{"install"}, want: []shims.Request{{Origin: "argv"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Plan(tt.args, ctx(t.TempDir(), nil))
			if err != nil || p == nil {
				t.Fatalf("Plan(%q) = %v, %v", tt.args, p, err)
			}
			if !reflect.DeepEqual(p.Requests, tt.want) {
				t.Errorf("Plan(%q).Requests = %+v, want %+v", tt.args, p.Requests, tt.want)
			}
		})
	}
}

const manifest = `
[package]
name = "p"   # a comment
version = "0.1.0"
description = """
multi "line" \
  text"""
authors = ['me <me@example.invalid>']
edition = 2021
metadata.x = { a = [1, 2, { b = "c" }], d = 1979-05-27T07:32:00Z }

[dependencies]
a = "1.2"
b = { version = "=1.2.3", features = ["x", "y"] }
"c" = { git = "https://example.invalid/c.git", rev = "abc" }
d = { path = "../d" }
e = { version = "2", registry = "corp" }
renamed = { package = "real", version = "0.3" }
w = { workspace = true }

[dependencies.tbl]
version = "~4"

[dev-dependencies]
dev1 = "5"

[build-dependencies]
cc = "1"

[target.'cfg(unix)'.dependencies]
libc = "0.2"

[target."x86_64-pc-windows-gnu".dev-dependencies.winx]
version = "0.1"

[patch.crates-io]
a = { git = "https://example.invalid/a.git" }
`

func TestManifestDeps(t *testing.T) {
	doc, err := parseTOML(manifest)
	if err != nil {
		t.Fatal(err)
	}
	ws := map[string]any{"w": "=0.9.1"}
	got := manifestDeps(doc, "Cargo.toml", ws)
	want := []shims.Request{
		{Name: "a", Spec: "1.2", Origin: "Cargo.toml"},
		{Name: "b", Spec: "=1.2.3", Exact: "1.2.3", Origin: "Cargo.toml"},
		{Name: "c", Source: "https://example.invalid/c.git", Origin: "Cargo.toml"},
		{Name: "d", Source: "path:../d", Origin: "Cargo.toml"},
		{Name: "e", Spec: "2", Registry: "corp", Origin: "Cargo.toml"},
		{Name: "real", Spec: "0.3", Origin: "Cargo.toml"},
		{Name: "tbl", Spec: "~4", Origin: "Cargo.toml"},
		{Name: "w", Spec: "=0.9.1", Exact: "0.9.1", Origin: "Cargo.toml"},
		{Name: "dev1", Spec: "5", Origin: "Cargo.toml"},
		{Name: "cc", Spec: "1", Origin: "Cargo.toml"},
		{Name: "libc", Spec: "0.2", Origin: "Cargo.toml"},
		{Name: "winx", Spec: "0.1", Origin: "Cargo.toml"},
		{Name: "a", Source: "https://example.invalid/a.git", Origin: "Cargo.toml [patch.crates-io]"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("manifestDeps = %+v\nwant %+v", got, want)
	}
	if d := doc["package"].(map[string]any)["description"]; d != "multi \"line\" text" {
		t.Errorf("description = %q", d)
	}
}

func TestWorkspace(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "Cargo.toml"), "[workspace]\nmembers = [\"crates/*\"]\n[workspace.dependencies]\nshared = \"1.0\"\n")
	write(t, filepath.Join(root, "crates", "one", "Cargo.toml"), "[package]\nname='one'\nversion='0.1.0'\n[dependencies]\nshared = { workspace = true }\nx = '1'\n")
	write(t, filepath.Join(root, "crates", "two", "Cargo.toml"), "[package]\nname='two'\nversion='0.1.0'\n[dependencies]\ny = '2'\n")
	p, err := Plan([]string{"build"}, ctx(filepath.Join(root, "crates", "one"), nil))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range p.Requests {
		names = append(names, r.Name+"@"+r.Spec+"@"+r.Origin)
	}
	want := "shared@1.0@crates/one/Cargo.toml x@1@crates/one/Cargo.toml shared@1.0@Cargo.toml [workspace.dependencies]"
	if strings.Join(names, " ") != want {
		t.Errorf("Plan(build) in a member: requests %q, want %q", names, want)
	}
	p, _ = Plan([]string{"--manifest-path", filepath.Join(root, "Cargo.toml"), "check"}, ctx(t.TempDir(), nil))
	if len(p.Requests) != 4 {
		t.Errorf("Plan(check) of the root: %+v, want the workspace dependency and three members' ones", p.Requests)
	}
}

func TestUnreadableManifest(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "Cargo.toml"), "[dependencies\nx = 1")
	p, err := Plan([]string{"build"}, ctx(dir, nil))
	if err != nil || p == nil || len(p.Requests) != 1 || p.Requests[0].Name != "" {
		t.Errorf("Plan(build) of a broken manifest = %+v, %v, want one unknown request", p, err)
	}
}

func TestPlanAdd(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "Cargo.toml"), "[package]\nname='p'\nversion='0.1.0'\n")
	p, err := Plan([]string{"add", "serde@=1.0.100", "tokio", "--features", "full", "--rename", "t"}, ctx(dir, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []shims.Request{{Name: "serde", Spec: "=1.0.100", Exact: "1.0.100", Origin: "argv"}, {Name: "tokio", Origin: "argv"}}
	if !reflect.DeepEqual(p.Requests, want) {
		t.Errorf("Plan(add).Requests = %+v, want %+v", p.Requests, want)
	}
}

const lockBefore = `version = 3

[[package]]
name = "p"
version = "0.1.0"
dependencies = ["mid"]
`

const lockAfter = `# This file is automatically @generated by Cargo.
version = 3

[[package]]
name = "leaf"
version = "1.0.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "aa"

[[package]]
name = "mid"
version = "0.2.0"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "bb"
dependencies = [
 "leaf 1.0.0 (registry+https://github.com/rust-lang/crates.io-index)",
]

[[package]]
name = "g"
version = "0.1.0"
source = "git+https://example.invalid/g.git#0123"

[[package]]
name = "p"
version = "0.1.0"
dependencies = [
 "g",
 "mid",
]
`

// TestLockResult: the registry packages whose .crate is on disk, changed
// or not, and a new git package; a crate of the lock that was never
// downloaded (another platform's) is left out.
func TestLockResult(t *testing.T) {
	b, err := parseLock([]byte(lockBefore))
	if err != nil {
		t.Fatal(err)
	}
	a, err := parseLock([]byte(lockAfter))
	if err != nil {
		t.Fatal(err)
	}
	both := map[string]bool{"leaf-1.0.0.crate": true, "mid-0.2.0.crate": true}
	got := lockResult(lockState{pkgs: b}, lockState{pkgs: a, crates: both}, []shims.Request{{Name: "mid", Spec: "0.2"}})
	src := "registry+https://github.com/rust-lang/crates.io-index"
	want := []shims.Package{
		{Name: "leaf", Version: "1.0.0", SourceURL: src, Hash: "sha256:aa", RequestedBy: "mid"},
		{Name: "mid", Version: "0.2.0", SourceURL: src, Hash: "sha256:bb", Direct: true, Requested: "0.2"},
		{Name: "g", Version: "0.1.0", SourceURL: "git+https://example.invalid/g.git#0123", Direct: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lockResult = %+v\nwant %+v", got, want)
	}
	if got := lockResult(lockState{pkgs: a, crates: both}, lockState{pkgs: a, crates: both}, nil); len(got) != 2 {
		t.Errorf("lockResult of an unchanged lock = %+v, want its two crates on disk", got)
	}
	got = lockResult(lockState{pkgs: a}, lockState{pkgs: a, crates: map[string]bool{"leaf-1.0.0.crate": true}}, nil)
	if len(got) != 1 || got[0].Name != "leaf" {
		t.Errorf("lockResult with only leaf downloaded = %+v, want leaf", got)
	}
}

func TestOldLockMetadata(t *testing.T) {
	l := "[[package]]\nname = \"x\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n\n" +
		"[metadata]\n\"checksum x 1.0.0 (registry+https://github.com/rust-lang/crates.io-index)\" = \"cc\"\n"
	p, err := parseLock([]byte(l))
	if err != nil || len(p) != 1 || p[0].Checksum != "cc" {
		t.Errorf("parseLock(v1) = %+v, %v, want x with checksum cc", p, err)
	}
}

func TestInstallCollect(t *testing.T) {
	home := t.TempDir()
	write(t, filepath.Join(home, ".crates2.json"), `{"installs":{"old 1.0.0 (registry+https://github.com/rust-lang/crates.io-index)":{}}}`)
	p, err := Plan([]string{"install", "tool@2.0.0"}, ctx(t.TempDir(), map[string]string{"CARGO_HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(home, ".crates2.json"), `{"installs":{"old 1.0.0 (registry+https://github.com/rust-lang/crates.io-index)":{},"tool 2.0.0 (registry+https://github.com/rust-lang/crates.io-index)":{"bins":["tool"]}}}`)
	write(t, filepath.Join(home, "registry", "cache", "index.crates.io-0000", "tool-2.0.0.crate"), "abc")
	got, err := p.Collect(0)
	want := []shims.Package{{Name: "tool", Version: "2.0.0", SourceURL: "registry+https://github.com/rust-lang/crates.io-index", Direct: true, Requested: "2.0.0",
		Hash: "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Collect = %+v, %v, want %+v", got, err, want)
	}
}
