package cargo

import (
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/sandtrail/sandtrail/shims"
)

// names lists the requests as name@source|registry, for short tables.
func names(reqs []shims.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Name+"@"+r.Source+"|"+r.Registry)
	}
	return out
}

func TestAlias(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // relative to the test's root; the cwd is root/w
		env   map[string]string
		args  []string
		want  []string // names(requests); nil: no plan
		err   string   // a substring of the error
	}{
		{name: "string", files: map[string]string{"w/.cargo/config.toml": "[alias]\nsetup = \"install --git file:///x evilbin\"\n"},
			args: []string{"setup"}, want: []string{"evilbin@file:///x|"}},
		{name: "array", files: map[string]string{"w/.cargo/config.toml": "[alias]\nsetup = [\"install\", \"--git\", \"file:///x\", \"evilbin\"]\n"},
			args: []string{"setup", "more"}, want: []string{"evilbin@file:///x|", "more@file:///x|"}},
		{name: "env", env: map[string]string{"CARGO_ALIAS_SET_UP": "install --git file:///x evilbin"},
			args: []string{"-q", "set-up"}, want: []string{"evilbin@file:///x|"}},
		{name: "argv --config", args: []string{"--config", "alias.setup='install evilbin'", "setup"}, want: []string{"evilbin@|"}},
		{name: "parent dir", files: map[string]string{".cargo/config": "[alias]\nsetup = \"install evilbin\"\n"},
			args: []string{"setup"}, want: []string{"evilbin@|"}},
		{name: "deeper wins", files: map[string]string{".cargo/config.toml": "[alias]\nsetup = \"install a\"\n",
			"w/.cargo/config.toml": "[alias]\nsetup = \"install b\"\n"}, args: []string{"setup"}, want: []string{"b@|"}},
		{name: "env over files", files: map[string]string{"w/.cargo/config.toml": "[alias]\nsetup = \"version\"\n"},
			env: map[string]string{"CARGO_ALIAS_SETUP": "install b"}, args: []string{"setup"}, want: []string{"b@|"}},
		{name: "arrays join", files: map[string]string{".cargo/config.toml": "[alias]\nsetup = [\"install\"]\n",
			"w/.cargo/config.toml": "[alias]\nsetup = [\"b\"]\n"}, args: []string{"setup"}, want: []string{"b@|"}},
		{name: "recursive", files: map[string]string{"w/.cargo/config.toml": "[alias]\nsetup = \"go b\"\ngo = \"install\"\n"},
			args: []string{"setup"}, want: []string{"b@|"}},
		{name: "global options in the alias", files: map[string]string{"w/.cargo/config.toml": "[alias]\nsetup = [\"--config\", \"alias.x='install c'\", \"x\"]\n"},
			args: []string{"setup"}, want: []string{"c@|"}},
		{name: "built-in alias replaced", files: map[string]string{"w/.cargo/config.toml": "[alias]\nb = \"install c\"\n"},
			args: []string{"b"}, want: []string{"c@|"}},
		{name: "built-in not aliased away", files: map[string]string{"w/.cargo/config.toml": "[alias]\ninstall = \"version\"\n"},
			args: []string{"install", "c"}, want: []string{"c@|"}},
		{name: "no-install command aliased", files: map[string]string{"w/.cargo/config.toml": "[alias]\ninfo = \"install c\"\n"},
			args: []string{"info"}, want: []string{"c@|"}},
		{name: "no-install alias of itself", files: map[string]string{"w/.cargo/config.toml": "[alias]\nversion = \"version\"\n"},
			args: []string{"version"}},
		{name: "cycle", files: map[string]string{"w/.cargo/config.toml": "[alias]\na = \"b\"\nb = \"a\"\n"},
			args: []string{"a"}, err: "recursive"},
		{name: "unparsable config", files: map[string]string{"w/.cargo/config.toml": "[alias\nsetup = \"install x\"\n"},
			args: []string{"setup"}, err: "bad TOML"},
		{name: "mixed types", files: map[string]string{".cargo/config.toml": "[alias]\nsetup = [\"install\"]\n",
			"w/.cargo/config.toml": "[alias]\nsetup = \"install b\"\n"}, args: []string{"setup"}, err: "mixes"},
		{name: "not a string", files: map[string]string{"w/.cargo/config.toml": "[alias]\nsetup = 3\n"}, args: []string{"setup"}, err: "neither"},
		{name: "include", files: map[string]string{"w/.cargo/config.toml": "include = \"x.toml\"\n"}, args: []string{"setup"}, err: "include"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, body := range tt.files {
				write(t, filepath.Join(root, p), body)
			}
			dir := filepath.Join(root, "w")
			write(t, filepath.Join(dir, "keep"), "")
			p, err := Plan(tt.args, ctx(dir, tt.env))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Plan(%q) = %+v, %v, want an error with %q", tt.args, p, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Plan(%q) = %v", tt.args, err)
			}
			var got []string
			if p != nil {
				got = names(p.Requests)
				if p.Args[len(p.Args)-len(tt.args)] != tt.args[0] {
					t.Errorf("Plan(%q).Args = %q, want the original argv after the mirror's", tt.args, p.Args)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plan(%q).Requests = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

func TestConfigSources(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		env   map[string]string
		args  []string
		want  []string
		err   string
	}{
		{name: "replace-with", files: map[string]string{".cargo/config.toml": "[source.crates-io]\nreplace-with = \"evil\"\n[source.evil]\nregistry = \"sparse+https://example.invalid/\"\n"},
			args: []string{"install", "a"}, want: []string{"@|sparse+https://example.invalid/", "a@|"}},
		{name: "git and directory", files: map[string]string{".cargo/config": "[source.g]\ngit = \"https://example.invalid/g.git\"\n[source.v]\ndirectory = \"vendor\"\n"},
			args: []string{"fetch"}, want: []string{"@https://example.invalid/g.git|", "@path:vendor|"}},
		{name: "registries", files: map[string]string{".cargo/config.toml": "[registries.corp]\nindex = \"https://example.invalid/index\"\n"},
			args: []string{"install", "a"}, want: []string{"@|https://example.invalid/index", "a@|"}},
		{name: "patch", files: map[string]string{".cargo/config.toml": "[patch.crates-io]\nserde = { git = \"https://example.invalid/serde.git\" }\n"},
			args: []string{"fetch"}, want: []string{"serde@https://example.invalid/serde.git|"}},
		{name: "home", files: map[string]string{"home/config.toml": "[registries.corp]\nindex = \"https://example.invalid/h\"\n"},
			env: map[string]string{"CARGO_HOME": "../home"}, args: []string{"install", "a"}, want: []string{"@|https://example.invalid/h", "a@|"}},
		{name: "registry env", env: map[string]string{"CARGO_REGISTRIES_MY_CORP_INDEX": "https://example.invalid/e"},
			args: []string{"install", "--registry", "my-corp", "a"}, want: []string{"a@|my-corp", "@|https://example.invalid/e"}},
		{name: "default registry env", env: map[string]string{"CARGO_REGISTRY_DEFAULT": "corp", "CARGO_REGISTRIES_CORP_INDEX": "https://example.invalid/e"},
			args: []string{"install", "a"}, want: []string{"a@|", "@|https://example.invalid/e"}},
		{name: "argv replaces crates-io", args: []string{"--config", `source."crates-io".replace-with="evil"`, "build"}, err: "source.crates-io"},
		{name: "argv file replaces crates-io", files: map[string]string{"c.toml": "[source.crates-io]\nreplace-with = \"evil\"\n"},
			args: []string{"--config", "../c.toml", "build"}, err: "source.crates-io"},
		{name: "alias replaces crates-io", files: map[string]string{".cargo/config.toml": "[alias]\nx = \"--config source.crates-io.replace-with='evil' build\"\n"},
			args: []string{"x"}, err: "source.crates-io"},
		{name: "file touches the mirror", files: map[string]string{".cargo/config.toml": "[source.sandtrail-mirror]\nreplace-with = \"evil\"\n"},
			args: []string{"build"}, err: "source.sandtrail-mirror"},
		{name: "file leads the mirror elsewhere", files: map[string]string{".cargo/config.toml": "[source.sandtrail-mirror]\nregistry = \"sparse+http://127.0.0.1:8480/crates/index/\"\nreplace-with = \"evil\"\n[source.evil]\ndirectory = \"vendor\"\n"},
			args: []string{"build"}, err: "source.sandtrail-mirror"},
		{name: "file makes the mirror a directory", files: map[string]string{".cargo/config.toml": "[source.sandtrail-mirror]\ndirectory = \"vendor\"\n"},
			args: []string{"build"}, err: "source.sandtrail-mirror"},
		{name: "file's mirror registry not a string", files: map[string]string{".cargo/config.toml": "[source.sandtrail-mirror]\nregistry = 1\n"},
			args: []string{"build"}, err: "source.sandtrail-mirror"},
		{name: "argv mirror registry", args: []string{"--config", `source.sandtrail-mirror.registry="sparse+https://example.invalid/"`, "build"}, err: "source.sandtrail-mirror"},
		// install.sh's $CARGO_HOME/config.toml, with a mirror at another
		// address than the shim's: the shim's --config replaces the value.
		{name: "install.sh's config", files: map[string]string{"home/config.toml": "# sandtrail mirror (install.sh --mirror)\n[source.crates-io]\nreplace-with = \"sandtrail-mirror\"\n\n[source.sandtrail-mirror]\nregistry = \"sparse+http://127.0.0.1:8484/crates/index/\"\n"},
			env: map[string]string{"CARGO_HOME": "../home"}, args: []string{"install", "a"}, want: []string{"a@|"}},
		{name: "unparsable argv", args: []string{"--config", "x.toml", "build"}, err: "parsing --config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, body := range tt.files {
				write(t, filepath.Join(root, p), body)
			}
			dir := filepath.Join(root, "w")
			write(t, filepath.Join(dir, "keep"), "")
			p, err := Plan(tt.args, ctx(dir, tt.env))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Plan(%q) = %+v, %v, want an error with %q", tt.args, p, err, tt.err)
				}
				return
			}
			if err != nil || p == nil {
				t.Fatalf("Plan(%q) = %v, %v", tt.args, p, err)
			}
			if got := names(p.Requests); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plan(%q).Requests = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

// TestNotRegular: a FIFO (which could answer the shim one thing and
// cargo another) as a manifest, lock, config file or --config file is
// refused, without hanging.
func TestNotRegular(t *testing.T) {
	tests := []struct {
		name, fifo string
		args       []string
	}{
		{name: "manifest", fifo: "w/Cargo.toml", args: []string{"build"}},
		{name: "lock", fifo: "w/Cargo.lock", args: []string{"build"}},
		{name: "config", fifo: "w/.cargo/config.toml", args: []string{"build"}},
		{name: "argv config", fifo: "w/c.toml", args: []string{"--config", "c.toml", "build"}},
		{name: "crates2", fifo: "home/.crates2.json", args: []string{"install", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "w")
			write(t, filepath.Join(dir, "Cargo.toml.keep"), "")
			write(t, filepath.Join(root, "home", "keep"), "")
			if tt.name != "manifest" {
				write(t, filepath.Join(dir, "Cargo.toml"), "[package]\nname = \"p\"\nversion = \"0.1.0\"\n")
			}
			write(t, filepath.Join(root, tt.fifo+".keep"), "")
			if err := syscall.Mkfifo(filepath.Join(root, tt.fifo), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := Plan(tt.args, ctx(dir, map[string]string{"CARGO_HOME": filepath.Join(root, "home")}))
			if tt.name == "manifest" {
				// An unreadable manifest is a request of unknown packages.
				if err == nil && (p == nil || len(p.Requests) != 1 || p.Requests[0].Name != "") {
					t.Fatalf("Plan(%q) with a FIFO %s = %+v, %v, want an unknown request", tt.args, tt.fifo, p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Fatalf("Plan(%q) with a FIFO %s = %+v, %v, want a not-regular error", tt.args, tt.fifo, p, err)
			}
		})
	}
}
