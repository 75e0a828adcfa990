package policies

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestDefaultLoads(t *testing.T) {
	p, err := Parse("default.yaml", DefaultYAML())
	if err != nil {
		t.Fatalf("Parse(default.yaml) = %v, want no error", err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v, want nil", err)
	}
	if _, err := New(p); err != nil {
		t.Fatalf("New(default) = %v, want nil", err)
	}
	if got := Default(); !reflect.DeepEqual(got, p) {
		t.Errorf("Default() differs from parsing default.yaml")
	}
	// The shipped file and the embedded copy are the same file.
	disk, err := os.ReadFile("default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(disk) != string(DefaultYAML()) {
		t.Errorf("DefaultYAML() differs from default.yaml")
	}
	// Spot-check what the docs promise about the default.
	checks := []struct {
		name      string
		got, want any
	}{
		{"on_unknown_source", p.OnUnknownSource, "block"},
		{"cooldown.min_age", p.Cooldown.MinAge, "48h"},
		{"install_scripts", p.InstallScripts, "flag"},
		{"egress.default", p.Egress.Default, "allow"},
		{"egress.doh_action", p.Egress.DoHAction, "flag"},
		{"agent_uid0", p.AgentUID0, "alert"},
		{"npm registry", p.Sources.Registries["npm"][0], "https://registry.npmjs.org/"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("Default().%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	for _, want := range []string{"/etc", "/root", "~/.ssh", "~/.aws", "~/.config/gcloud", "~/.npmrc", "~/.pypirc", "~/.netrc", "~/.docker/config.json", "~/.kube", "/var/run/secrets"} {
		found := false
		for _, s := range p.Files.SensitiveRead {
			found = found || s == want
		}
		if !found {
			t.Errorf("Default().Files.SensitiveRead lacks %s", want)
		}
	}
}

func TestLoadEmptyPathIsDefault(t *testing.T) {
	p, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, Default()) {
		t.Errorf("Load(\"\") differs from Default()")
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || errors.Is(err, ErrInvalid) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want a not-exist error that is not ErrInvalid", err)
	}
}

func TestLoadGood(t *testing.T) {
	p, err := Load("testdata/good-minimal.yaml")
	if err != nil {
		t.Fatalf("Load(good-minimal.yaml) = %v", err)
	}
	if p.Cooldown.MinAge != "3d" || p.Cooldown.Action != "block" || len(p.Sources.Registries["npm"]) != 1 {
		t.Errorf("Load(good-minimal.yaml) = %+v", p)
	}
	e := p.Effective()
	if e.OnUnknownSource != "block" || e.AgentUID0 != "alert" || e.ToolIO.Verbosity != "names" || e.Version != 1 {
		t.Errorf("Effective() = %+v, want the zero values spelled out", e)
	}
}

// TestBadFiles loads every testdata/bad-*.yaml and compares the errors with
// the golden testdata/bad-*.golden. Refresh with -update.
func TestBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/bad-*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/bad-*.yaml: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			_, err := Load(file)
			if err == nil {
				t.Fatalf("Load(%s) = nil, want errors", file)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Load(%s) = %v, want it to wrap ErrInvalid", file, err)
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("Load(%s) = %T, want Errors", file, err)
			}
			for _, e := range es {
				if e.Line == 0 {
					t.Errorf("Load(%s): %q has no line", file, e)
				}
				if e.Field == "" && !strings.HasPrefix(e.Msg, "syntax error") {
					t.Errorf("Load(%s): %q names no field", file, e)
				}
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("reading golden file (run with -update): %v", err)
			}
			if got != string(want) {
				t.Errorf("Load(%s) errors =\n%s\nwant\n%s", file, got, want)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	p, err := Parse("x.yaml", []byte("limits:\n  memory: 512M\n  cpus: 0.5\n  pids: 256\n  timeout: 10m\n  disk: 2G\n"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	l := e.Limits()
	if l.MemoryBytes != 512<<20 || l.CPUs != 0.5 || l.Pids != 256 || l.TimeoutMS != 600_000 || l.DiskBytes != 2<<30 {
		t.Errorf("Limits() = %+v, want 512M, 0.5 cpus, 256 pids, 10m, 2G", l)
	}
}

func TestParseNetRateLimits(t *testing.T) {
	tests := []struct {
		name, yaml string
		rate       int64
		action     string
		err        string
	}{
		{name: "unset", yaml: "limits: {}\n"},
		{name: "rate", yaml: "limits:\n  net_rate: 1MB\n", rate: 1 << 20},
		{name: "rate per second and warn", yaml: "limits:\n  net_rate: 2M/s\n  net_rate_action: warn\n", rate: 2 << 20, action: "warn"},
		{name: "throttle", yaml: "limits:\n  net_rate: 1K\n  net_rate_action: throttle\n", rate: 1 << 10, action: "throttle"},
		{name: "bad rate", yaml: "limits:\n  net_rate: fast\n", err: "limits.net_rate"},
		{name: "bad action", yaml: "limits:\n  net_rate_action: kill\n", err: "limits.net_rate_action"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("x.yaml", []byte(tt.yaml))
			if err == nil {
				var e *Engine
				if e, err = New(p); err == nil {
					l := e.Limits()
					if l.NetRate != tt.rate || l.NetRateAction != tt.action {
						t.Errorf("Limits() = %+v, want net rate %d, action %q", l, tt.rate, tt.action)
					}
				}
			}
			if (err != nil) != (tt.err != "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Errorf("New(%q) error = %v, want one naming %q", tt.yaml, err, tt.err)
			}
		})
	}
}

func TestParseTooLarge(t *testing.T) {
	_, err := Parse("big.yaml", make([]byte, MaxFileSize+1))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Parse(too large) = %v, want a size error", err)
	}
}

func TestParseAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		b.WriteString("a")
		b.WriteString(string(rune('0' + i)))
		b.WriteString(": &a")
		b.WriteString(string(rune('0' + i)))
		b.WriteString(" [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a")
			b.WriteString(string(rune('0' + i - 1)))
		}
		b.WriteString("]\n")
	}
	b.WriteString("sources:\n  git_hosts: *a8\n")
	_, err := Parse("bomb.yaml", []byte(b.String()))
	if err == nil {
		t.Fatal("Parse(alias bomb) = nil, want an error")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(DefaultYAML())
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("Parse = %v (%T), want Errors", err, err)
			}
			for _, e := range es {
				if e.Field == "" && !strings.HasPrefix(e.Msg, "syntax error") {
					t.Fatalf("Parse error %q names no field", e)
				}
				// viper's own errors are a fallback that names no real
				// field: the structure walk must have caught the problem.
				if strings.HasPrefix(e.Msg, "decoding:") || strings.HasPrefix(e.Msg, "reading:") {
					t.Fatalf("Parse error %q came from viper, not the structure walk", e)
				}
			}
			return
		}
		if _, err := New(p); err != nil {
			t.Fatalf("New(Parse(...)) = %v after Parse accepted it", err)
		}
	})
}

func TestSyntaxErrorLines(t *testing.T) {
	tests := []struct {
		name string
		in   string
		line int
	}{
		{name: "unclosed flow sequence", in: "version: 1\na: [1, 2\n", line: 2},
		{name: "bad indentation", in: "a:\n  b: 1\n c: 2\n", line: 3},
		{name: "mapping in plain scalar", in: "version: 1\na: b: c\n", line: 2},
		{name: "tab", in: "x:\n\t- y\n", line: 2},
		{name: "unterminated quote", in: "version: 1\na: \"unterminated\n", line: 2},
		{name: "unclosed flow mapping", in: "version: 1\n\na: {x: 1\n", line: 3},
		// The parser names the line where the broken construct begins.
		{name: "sequence then key", in: "a:\n  - 1\n  b: 2\n", line: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(tt.in))
			var es Errors
			if !errors.As(err, &es) || len(es) != 1 {
				t.Fatalf("Parse(%q) = %v, want one error", tt.in, err)
			}
			if es[0].Line != tt.line || !strings.HasPrefix(es[0].Msg, "syntax error") {
				t.Errorf("Parse(%q) = %q at line %d, want a syntax error at line %d", tt.in, es[0], es[0].Line, tt.line)
			}
		})
	}
}
