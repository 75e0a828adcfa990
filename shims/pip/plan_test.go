package pip

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/sandtrail/sandtrail/shims"
)

func TestPlanRequests(t *testing.T) {
	const idx = "https://i.example.invalid/simple/"
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []shims.Request // nil: no plan
	}{
		{"version", []string{"--version"}, nil, nil},
		{"download", []string{"download", "a"}, nil, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"download dest", []string{"download", "-d", "out", "--dest=o2", "--destination-dir", "o3", "git+https://example.invalid/r.git"}, nil, []shims.Request{{Source: "git+https://example.invalid/r.git", Origin: "argv"}}},
		{"wheel", []string{"wheel", "-w", "out", "--no-deps", "./src", "-i", idx}, nil, []shims.Request{{Source: "./src", Origin: "argv"}}},
		{"wheel index", []string{"wheel", "--wheel-dir=out", "b"}, map[string]string{"PIP_INDEX_URL": idx}, []shims.Request{{Name: "b", Registry: idx, Origin: "argv"}}},
		{"freeze", []string{"freeze"}, map[string]string{"PIP_EDITABLE": "."}, nil},
		{"env editable", []string{"install"}, map[string]string{"PIP_EDITABLE": "/src/x ./y"}, []shims.Request{{Source: "/src/x", Origin: "env PIP_EDITABLE"}, {Source: "./y", Origin: "env PIP_EDITABLE"}}},
		{"env editable lower", []string{"install"}, map[string]string{"PIP_editable": "/src/x"}, []shims.Request{{Source: "/src/x", Origin: "env PIP_editable"}}},
		{"env pypi url", []string{"install", "a"}, map[string]string{"PIP_PYPI_URL": idx}, []shims.Request{{Name: "a", Registry: idx, Origin: "argv"}}},
		{"argv index beats env", []string{"install", "a", "-i", "https://a.example.invalid/"}, map[string]string{"PIP_INDEX_URL": idx}, []shims.Request{{Name: "a", Registry: "https://a.example.invalid/", Origin: "argv"}}},
		{"env find links", []string{"install", "a", "-f", "/w2"}, map[string]string{"PIP_FIND_LINKS": "/w1"}, []shims.Request{{Name: "a", Origin: "argv"}, {Registry: "/w1", Origin: "env PIP_FIND_LINKS"}, {Registry: "/w2", Origin: "argv"}}},
		{"env no index", []string{"install", "a"}, map[string]string{"PIP_NO_INDEX": "yes", "PIP_INDEX_URL": idx}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"abbreviated isolated reads env", []string{"--isol", "install", "a"}, map[string]string{"PIP_INDEX_URL": idx}, []shims.Request{{Name: "a", Registry: idx, Origin: "argv"}}},
		{"list", []string{"-v", "list"}, nil, nil},
		{"plain", []string{"install", "a"}, nil, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"pep508", []string{"install", "a[x,y]>=1,<2; python_version<'3.9'"}, nil, []shims.Request{{Name: "a", Spec: ">=1,<2", Origin: "argv"}}},
		{"exact", []string{"install", "a==1.0"}, nil, []shims.Request{{Name: "a", Spec: "==1.0", Exact: "1.0", Origin: "argv"}}},
		{"wildcard", []string{"install", "a==1.*"}, nil, []shims.Request{{Name: "a", Spec: "==1.*", Origin: "argv"}}},
		{"arbitrary", []string{"install", "a===x1"}, nil, []shims.Request{{Name: "a", Spec: "===x1", Exact: "x1", Origin: "argv"}}},
		{"at url", []string{"install", "a @ https://example.invalid/a.whl"}, nil, []shims.Request{{Name: "a", Source: "https://example.invalid/a.whl", Origin: "argv"}}},
		{"url", []string{"install", "https://example.invalid/a-1-py3-none-any.whl"}, nil, []shims.Request{{Source: "https://example.invalid/a-1-py3-none-any.whl", Origin: "argv"}}},
		{"vcs", []string{"install", "git+https://example.invalid/r.git#egg=r"}, nil, []shims.Request{{Name: "r", Source: "git+https://example.invalid/r.git#egg=r", Origin: "argv"}}},
		{"path", []string{"install", "./pkg"}, nil, []shims.Request{{Source: "./pkg", Origin: "argv"}}},
		{"editable", []string{"install", "-e", "."}, nil, []shims.Request{{Source: ".", Origin: "argv"}}},
		{"editable glued", []string{"install", "-e."}, nil, []shims.Request{{Source: ".", Origin: "argv"}}},
		{"index", []string{"install", "-i", idx, "a"}, nil, []shims.Request{{Name: "a", Registry: idx, Origin: "argv"}}},
		{"index glued", []string{"install", "-i" + idx, "a"}, nil, []shims.Request{{Name: "a", Registry: idx, Origin: "argv"}}},
		{"index abbrev", []string{"install", "--index=" + idx, "a"}, nil, []shims.Request{{Name: "a", Registry: idx, Origin: "argv"}}},
		{"index before command", []string{"--isolated", "install", "a", "--pypi-url", idx}, nil, []shims.Request{{Name: "a", Registry: idx, Origin: "argv"}}},
		{"extra", []string{"install", "--extra-index-url", "https://x.example.invalid/", "a"}, nil, []shims.Request{{Name: "a", Origin: "argv"}, {Registry: "https://x.example.invalid/", Origin: "argv"}}},
		{"extra abbrev", []string{"install", "--extra", "https://x.example.invalid/", "a"}, nil, []shims.Request{{Name: "a", Origin: "argv"}, {Registry: "https://x.example.invalid/", Origin: "argv"}}},
		{"find links", []string{"install", "-f", "/wheels", "a"}, nil, []shims.Request{{Name: "a", Origin: "argv"}, {Registry: "/wheels", Origin: "argv"}}},
		{"clustered", []string{"install", "-qqUi", idx, "a"}, nil, []shims.Request{{Name: "a", Registry: idx, Origin: "argv"}}},
		{"value opts", []string{"--python", "install", "install", "--target", "a", "b"}, nil, []shims.Request{{Name: "b", Origin: "argv"}}},
		{"double dash", []string{"install", "--", "--not-an-option"}, nil, []shims.Request{{Source: "--not-an-option", Origin: "argv"}}},
		{"unknown option", []string{"install", "--frob", "a"}, nil, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"env index", []string{"install", "a"}, map[string]string{"PIP_INDEX_URL": idx, "PIP_EXTRA_INDEX_URL": "https://x.example.invalid/ https://y.example.invalid/"},
			[]shims.Request{{Name: "a", Registry: idx, Origin: "argv"}, {Registry: "https://x.example.invalid/", Origin: "env PIP_EXTRA_INDEX_URL"}, {Registry: "https://y.example.invalid/", Origin: "env PIP_EXTRA_INDEX_URL"}}},
		{"env mirror", []string{"install", "a"}, map[string]string{"PIP_INDEX_URL": "http://127.0.0.1:8480/pypi/simple/"}, []shims.Request{{Name: "a", Origin: "argv"}}},
		{"isolated ignores env", []string{"--isolated", "install", "a"}, map[string]string{"PIP_INDEX_URL": idx}, []shims.Request{{Name: "a", Origin: "argv"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := shims.Context{Dir: t.TempDir(), Getenv: func(k string) string { return tc.env[k] }, Mirror: "http://127.0.0.1:8480", TempDir: t.TempDir()}
			p, err := Plan(tc.args, c)
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

func TestPlanArgs(t *testing.T) {
	tmp := t.TempDir()
	c := shims.Context{Dir: "/w", Getenv: func(string) string { return "" }, TempDir: tmp}
	p, _ := Plan([]string{"-q", "install", "a"}, c)
	if want := []string{"-q", "install", "--report", filepath.Join(tmp, "pip-report.json"), "a"}; !slices.Equal(p.Args, want) {
		t.Errorf("Plan(-q install a).Args = %q, want %q", p.Args, want)
	}
	own := filepath.Join(tmp, "pip-report.json")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"file", []string{"install", "--report", "r.json", "a"}, []string{"install", "--report", own, "a"}},
		{"stdout", []string{"install", "--report", "-", "a"}, []string{"install", "--report", own, "a"}},
		{"eq and abbrev", []string{"-q", "install", "--rep=/dev/null", "a", "--report", "x"}, []string{"-q", "install", "--report", own, "a"}},
		{"download untouched", []string{"download", "--report", "x", "a"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Plan(tc.args, c)
			if err != nil || !slices.Equal(p.Args, tc.want) {
				t.Errorf("Plan(%q).Args = %q, %v, want %q", tc.args, p.Args, err, tc.want)
			}
		})
	}
}

// TestReportCopy: the report pip wrote to the shim's file reaches the
// file or stdout the agent asked for (argv, else PIP_REPORT), and is read
// back, even with --dry-run.
func TestReportCopy(t *testing.T) {
	const rep = `{"install":[{"metadata":{"name":"a","version":"1"},"download_info":{"url":"u"},"requested":true}]}`
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		file    string // relative to the working directory; "" for stdout
		wantPks int
	}{
		{"file", []string{"install", "--report", "r.json", "a"}, nil, "r.json", 1},
		{"stdout", []string{"install", "--report", "-", "a"}, nil, "", 1},
		{"env", []string{"install", "a"}, map[string]string{"PIP_REPORT": "e.json"}, "e.json", 1},
		{"argv beats env", []string{"install", "a", "--report=r.json"}, map[string]string{"PIP_REPORT": "-"}, "r.json", 1},
		{"dry run", []string{"install", "--dry-run", "--report", "-", "a"}, nil, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, tmp := t.TempDir(), t.TempDir()
			var out bytes.Buffer
			stdout = &out
			defer func() { stdout = os.Stdout }()
			p, err := Plan(tc.args, shims.Context{Dir: dir, Getenv: func(k string) string { return tc.env[k] }, TempDir: tmp})
			if err != nil || p.Collect == nil {
				t.Fatalf("Plan(%q) = %+v, %v", tc.args, p, err)
			}
			write(t, filepath.Join(tmp, "pip-report.json"), rep)
			pks, err := p.Collect(0)
			if err != nil || len(pks) != tc.wantPks {
				t.Errorf("Collect = %+v, %v, want %d packages", pks, err, tc.wantPks)
			}
			got := out.String()
			if tc.file != "" {
				b, _ := os.ReadFile(filepath.Join(dir, tc.file))
				got = string(b) + "\n"
			}
			if got != rep+"\n" {
				t.Errorf("report copied as %q, want %q", got, rep+"\n")
			}
		})
	}
}

// TestRequirements: nested -r relative to the including file, -c,
// options, continuations, comments, ${VAR}, per-requirement options.
func TestRequirements(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	write(t, filepath.Join(dir, "req.txt"), "-i ${IDX}\n--extra-index-url https://x.example.invalid/ # extra\n"+
		"a==1.0 \\\n    --hash=sha256:abc\n-r sub/more.txt\n-c cons.txt\n#b\nc>=2 # comment\n-e git+https://example.invalid/e.git#egg=e\n")
	write(t, filepath.Join(dir, "sub", "more.txt"), "d\n-r ../sub/more.txt\n--find-links=../wheels\n")
	write(t, filepath.Join(dir, "cons.txt"), "a<2\n--index-url https://c.example.invalid/\n")
	open := func(p string) ([]byte, error) { return os.ReadFile(p) }
	name := filepath.Join(dir, "req.txt")
	data, _ := os.ReadFile(name)
	reqs, opts, err := ParseRequirements(name, data, open, func(k string) string { return map[string]string{"IDX": "https://i.example.invalid/"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := []shims.Request{{Name: "a", Spec: "==1.0", Exact: "1.0", Origin: "req.txt:3"}, {Name: "d", Origin: "more.txt:1"},
		{Name: "c", Spec: ">=2", Origin: "req.txt:8"}, {Name: "e", Source: "git+https://example.invalid/e.git#egg=e", Origin: "req.txt:9"}}
	if !reflect.DeepEqual(reqs, want) {
		t.Errorf("ParseRequirements = %+v, want %+v", reqs, want)
	}
	if opts.IndexURL != "https://c.example.invalid/" || len(opts.ExtraIndexURLs) != 1 || len(opts.FindLinks) != 1 ||
		opts.FindLinks[0].Value != "../wheels" || len(opts.Constraints) != 1 || opts.Constraints[0].Name != "a" {
		t.Errorf("ParseRequirements options = %+v", opts)
	}
	_, _, err = ParseRequirements("r.txt", []byte("-r https://example.invalid/r.txt\n"), open, nil)
	if !errors.Is(err, ErrURLFile) {
		t.Errorf("ParseRequirements(-r URL) error = %v, want ErrURLFile", err)
	}
	if _, err := Plan([]string{"install", "-r", "missing.txt"}, shims.Context{Dir: dir}); err == nil {
		t.Error("Plan(install -r missing.txt): no error")
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestParseReport(t *testing.T) {
	rep := `{"version":"1","install":[
	 {"metadata":{"name":"Top","version":"1","requires_dist":["mid>=1"]},"download_info":{"url":"u/top","archive_info":{"hash":"sha256=AB"}},"requested":true},
	 {"metadata":{"name":"mid","version":"2","requires_dist":["leaf ; extra == 'x'"]},"download_info":{"url":"u/mid","archive_info":{"hashes":{"sha256":"cd"}}}},
	 {"metadata":{"name":"leaf","version":"3"},"download_info":{"url":"u/leaf","archive_info":{"hashes":{"md5":"ef"}}}},
	 {"metadata":{"name":"w","version":"4"},"download_info":{"url":"https://example.invalid/w.whl","archive_info":{}},"requested":true,"is_direct":true}]}`
	got, err := ParseReport([]byte(rep), []shims.Request{{Name: "top", Spec: ">=1"}, {Source: "https://example.invalid/w.whl"}})
	want := []shims.Package{
		{Name: "Top", Version: "1", SourceURL: "u/top", Hash: "sha256:ab", Direct: true, Requested: ">=1"},
		{Name: "mid", Version: "2", SourceURL: "u/mid", Hash: "sha256:cd", RequestedBy: "Top"},
		{Name: "leaf", Version: "3", SourceURL: "u/leaf", Hash: "md5:ef", RequestedBy: "Top"},
		{Name: "w", Version: "4", SourceURL: "https://example.invalid/w.whl", Direct: true, Requested: "https://example.invalid/w.whl"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseReport = %+v, %v, want %+v", got, err, want)
	}
}
