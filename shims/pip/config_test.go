package pip

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/registry-mirror/pypi/pypitest"
	"github.com/sandtrail/sandtrail/shims"
)

// TestConfigFiles: pip.conf files give requests as argv would, in pip's
// precedence (site-wide, user, virtualenv, PIP_CONFIG_FILE; [install]
// over [global]; the environment over files; argv over both).
func TestConfigFiles(t *testing.T) {
	const idx = "https://i.example.invalid/simple/"
	tests := []struct {
		name  string
		files map[string]string // ROOT/<path> → content; home is ROOT/home
		env   map[string]string // ROOT is replaced
		args  []string
		want  []shims.Request
	}{
		{"etc index", map[string]string{"etc/pip.conf": "[global]\nindex-url = " + idx}, map[string]string{"XDG_CONFIG_DIRS": "ROOT/etc/xdg"}, []string{"install", "a"}, nil},
		{"xdg dir", map[string]string{"etc/xdg/pip/pip.conf": "[global]\nindex_url: " + idx}, map[string]string{"XDG_CONFIG_DIRS": "ROOT/etc/xdg"}, []string{"install", "a"},
			[]shims.Request{{Name: "a", Registry: idx, Origin: "argv"}}},
		{"user editable", map[string]string{"home/.config/pip/pip.conf": "[install]\neditable =\n  /src/x\n  /src/y\n"}, nil, []string{"install"},
			[]shims.Request{{Source: "/src/x", Origin: "pip.conf ROOT/home/.config/pip/pip.conf"}, {Source: "/src/y", Origin: "pip.conf ROOT/home/.config/pip/pip.conf"}}},
		{"legacy user then new", map[string]string{"home/.pip/pip.conf": "[global]\nindex-url=https://old.example.invalid/", "home/.config/pip/pip.conf": "[global]\nindex-url=" + idx}, nil, []string{"install", "a"},
			[]shims.Request{{Name: "a", Registry: idx, Origin: "argv"}}},
		{"install beats global", map[string]string{"v/pip.conf": "[install]\nindex-url=" + idx, "c.conf": "[global]\nindex-url=https://g.example.invalid/"},
			map[string]string{"VIRTUAL_ENV": "ROOT/v", "PIP_CONFIG_FILE": "ROOT/c.conf"}, []string{"install", "a"}, []shims.Request{{Name: "a", Registry: idx, Origin: "argv"}}},
		{"config file beats venv", map[string]string{"v/pip.conf": "[global]\nindex-url=https://v.example.invalid/", "c.conf": "[global]\npypi-url=" + idx},
			map[string]string{"VIRTUAL_ENV": "ROOT/v", "PIP_CONFIG_FILE": "ROOT/c.conf"}, []string{"install", "a"}, []shims.Request{{Name: "a", Registry: idx, Origin: "argv"}}},
		{"config file skips user", map[string]string{"home/.config/pip/pip.conf": "[global]\nextra-index-url=https://u.example.invalid/", "c.conf": "[global]\n"},
			map[string]string{"PIP_CONFIG_FILE": "ROOT/c.conf"}, []string{"install", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"devnull", map[string]string{"home/.config/pip/pip.conf": "[global]\nextra-index-url=https://u.example.invalid/"},
			map[string]string{"PIP_CONFIG_FILE": "/dev/null"}, []string{"install", "a"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"env beats file", map[string]string{"home/.config/pip/pip.conf": "[install]\nfind-links=/f1 /f2"}, map[string]string{"PIP_FIND_LINKS": "/f3"}, []string{"install", "a", "-f", "/f4"},
			[]shims.Request{{Name: "a", Origin: "argv"}, {Registry: "/f3", Origin: "env PIP_FIND_LINKS"}, {Registry: "/f4", Origin: "argv"}}},
		{"default section", map[string]string{"home/.config/pip/pip.conf": "[DEFAULT]\nextra-index-url=https://d.example.invalid/\n[install]\n"}, nil, []string{"install", "a"},
			[]shims.Request{{Name: "a", Origin: "argv"}, {Registry: "https://d.example.invalid/", Origin: "pip.conf ROOT/home/.config/pip/pip.conf"}}},
		{"download section", map[string]string{"home/.config/pip/pip.conf": "[download]\nno-index=true\n[global]\nindex-url=" + idx}, nil, []string{"download", "a"},
			[]shims.Request{{Name: "a", Origin: "argv"}}},
		{"isolated skips user", map[string]string{"home/.config/pip/pip.conf": "[global]\nindex-url=" + idx}, nil, []string{"--isolated", "install", "a"},
			[]shims.Request{{Name: "a", Origin: "argv"}}},
		{"requirement", map[string]string{"home/.config/pip/pip.conf": "[global]\nrequirement = r.txt", "work/r.txt": "b==2\n"}, nil, []string{"install"},
			[]shims.Request{{Name: "b", Spec: "==2", Exact: "2", Origin: "r.txt:1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			os.MkdirAll(filepath.Join(root, "work"), 0o755)
			for f, s := range tc.files {
				os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755)
				write(t, filepath.Join(root, f), s)
			}
			env := map[string]string{"HOME": filepath.Join(root, "home"), "XDG_CONFIG_DIRS": filepath.Join(root, "none")}
			for k, v := range tc.env {
				env[k] = strings.ReplaceAll(v, "ROOT", root)
			}
			for i := range tc.want {
				tc.want[i].Origin = strings.ReplaceAll(tc.want[i].Origin, "ROOT", root)
			}
			if tc.name == "etc index" {
				// /etc/pip.conf is the machine's: only check that a
				// file there would be read.
				if !strings.Contains(strings.Join(configFiles(func(k string) string { return env[k] }, false), " "), "/etc/pip.conf") {
					t.Error("configFiles: /etc/pip.conf missing")
				}
				return
			}
			p, err := Plan(tc.args, shims.Context{Dir: filepath.Join(root, "work"), Getenv: func(k string) string { return env[k] }, TempDir: t.TempDir()})
			if err != nil || p == nil || !reflect.DeepEqual(p.Requests, tc.want) {
				t.Errorf("Plan(%q) = %+v, %v, want %+v", tc.args, p, err, tc.want)
			}
		})
	}
}

// TestParseINI: RawConfigParser's reading, and its refusals.
func TestParseINI(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []iniEntry
		err  bool
	}{
		{"basic", "# c\n[global]\nIndex-URL = x\n; c\nfind-links: a=b\n", []iniEntry{{"global", "index-url", "x"}, {"global", "find-links", "a=b"}}, false},
		{"continuation", "[g]\nk = a\n  b\n\n  c\nj=\n", []iniEntry{{"g", "k", "a\nb\n\nc"}, {"g", "j", ""}}, false},
		{"header last bracket", "[a] b]\nk=v", []iniEntry{{"a] b", "k", "v"}}, false},
		{"no section", "k=v\n", nil, true},
		{"dup key", "[g]\nk=1\nK=2\n", nil, true},
		{"dup section", "[g]\n[g]\n", nil, true},
		{"bad line", "[g]\njunk\n", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseINI([]byte(tc.in))
			if (err != nil) != tc.err || !tc.err && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseINI(%q) = %+v, %v, want %+v (error %v)", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

// TestNotRegularFiles: a -r file, a -c file or a pip.conf that is a FIFO
// is refused without blocking.
func TestNotRegularFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"requirement", []string{"install", "-r", "fifo"}, nil},
		{"constraint", []string{"install", "a", "-c", "fifo"}, nil},
		{"nested", []string{"install", "-r", "r.txt"}, nil},
		{"config file", []string{"install", "a"}, map[string]string{"PIP_CONFIG_FILE": "fifo"}},
		{"device", []string{"install", "-r", "/dev/zero"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
				t.Skipf("making a FIFO: %v", err)
			}
			write(t, filepath.Join(dir, "r.txt"), "-r fifo\n")
			env := map[string]string{}
			for k, v := range tc.env {
				env[k] = filepath.Join(dir, v)
			}
			done := make(chan error, 1)
			go func() {
				_, err := Plan(tc.args, shims.Context{Dir: dir, Getenv: func(k string) string { return env[k] }, TempDir: t.TempDir()})
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, ErrNotRegular) {
					t.Errorf("Plan(%q) error %v, want ErrNotRegular", tc.args, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("Plan(%q) blocked", tc.args)
			}
		})
	}
}

// TestRealReportStdout: with --report -, what the agent sees on stdout
// through the plan (pip's stdout, then what Collect writes) is what the
// real pip 23 prints without the shim.
func TestRealReportStdout(t *testing.T) {
	py := "/usr/bin/python3"
	if exec.Command(py, "-m", "pip", "--version").Run() != nil {
		t.Skip("needs /usr/bin/python3 with pip")
	}
	ix := pypitest.Start(t, fixture()...)
	dir, home := t.TempDir(), t.TempDir()
	args := []string{"--isolated", "--disable-pip-version-check", "install", "-q", "--dry-run", "--ignore-installed", "--no-cache-dir",
		"--no-input", "--retries", "0", "--only-binary", ":all:", "--index-url", ix.SimpleURL(), "--report", "-", "fixture-pkg==1.5"}
	run := func(args []string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, py, append([]string{"-m", "pip"}, args...)...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8", "PYTHONNOUSERSITE=1", "PIP_CONFIG_FILE=/dev/null"}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("pip %q: %v\n%s", args, err, out)
		}
		return out
	}
	direct := run(args)
	p, err := Plan(args, shims.Context{Dir: dir, Getenv: func(string) string { return "" }, TempDir: t.TempDir()})
	if err != nil || p == nil || p.Collect == nil {
		t.Fatalf("Plan(%q) = %+v, %v", args, p, err)
	}
	var out bytes.Buffer
	stdout = &out
	defer func() { stdout = os.Stdout }()
	shimmed := run(p.Args)
	if _, err := p.Collect(0); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	shimmed = append(shimmed, out.Bytes()...)
	if !bytes.Equal(direct, shimmed) {
		t.Errorf("stdout through the plan = %q, want pip's own %q", shimmed, direct)
	}
}
