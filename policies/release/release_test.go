package release

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

func mustRead(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseNpm(t *testing.T) {
	in, err := ParseNpm("left-pad", mustRead(t, "npm-left-pad.json"))
	if err != nil {
		t.Fatal(err)
	}
	if in.Name != "left-pad" || len(in.Versions) != 4 || in.Tags["latest"] != "1.3.0" {
		t.Fatalf("ParseNpm = %+v", in)
	}
	tests := []struct {
		version   string
		published string
		scripts   bool
		artifact  string
	}{
		{"1.1.3", "2016-09-25T12:00:00Z", false, "https://registry.npmjs.org/left-pad/-/left-pad-1.1.3.tgz"},
		{"1.2.0", "2017-11-30T10:00:00Z", false, "https://registry.npmjs.org/left-pad/-/left-pad-1.2.0.tgz"},
		{"1.3.0", "2018-04-09T05:49:34.593Z", true, "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz"},
		{"2.0.0-beta.1", "2026-11-28T00:00:00Z", true, "https://registry.npmjs.org/left-pad/-/left-pad-2.0.0-beta.1.tgz"},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			v, ok := in.Lookup(tt.version)
			want, _ := time.Parse(time.RFC3339Nano, tt.published)
			if !ok || !v.Published.Equal(want) || v.InstallScripts != tt.scripts || v.Artifact != tt.artifact {
				t.Errorf("ParseNpm: version %s = %+v, want published %s, install scripts %v, artifact %s", tt.version, v, tt.published, tt.scripts, tt.artifact)
			}
		})
	}
}

// pypiBase is the URL of the page of requests.
var pypiBase, _ = url.Parse("https://pypi.org/simple/requests/")

func TestParsePyPI(t *testing.T) {
	in, err := ParsePyPI("requests", mustRead(t, "pypi-requests.json"), pypiBase)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		version   string
		published string
		yanked    bool
		scripts   bool
		artifact  string
	}{
		{"2.31.0", "2023-05-22T15:12:42.313790Z", false, false, "https://files.pythonhosted.org/packages/70/8e/requests-2.31.0-py3-none-any.whl"},
		{"2.32.0", "2024-05-20T15:00:00Z", true, false, "https://pypi.org/packages/requests-2.32.0-py3-none-any.whl"},
		{"2.32.3", "2024-05-29T15:37:49Z", false, true, "https://files.pythonhosted.org/packages/requests-2.32.3.tar.gz"},
		{"3.0.0a1", "2026-11-28T00:00:00Z", false, false, "https://files.pythonhosted.org/packages/requests-3.0.0a1-py3-none-any.whl"},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			v, ok := in.Lookup(tt.version)
			want, _ := time.Parse(time.RFC3339Nano, tt.published)
			if !ok || !v.Published.Equal(want) || v.Yanked != tt.yanked || v.InstallScripts != tt.scripts || v.Artifact != tt.artifact {
				t.Errorf("ParsePyPI: version %s = %+v, want published %s, yanked %v, install scripts %v, artifact %s", tt.version, v, tt.published, tt.yanked, tt.scripts, tt.artifact)
			}
		})
	}
	if _, ok := in.Lookup("0.2.0"); ok {
		t.Errorf("ParsePyPI: an .exe file made a version")
	}
}

func TestParseCrates(t *testing.T) {
	in, err := ParseCrates("serde", mustRead(t, "crates-serde"), "https://static.crates.io/crates")
	if err != nil {
		t.Fatal(err)
	}
	if in.Name != "serde" || len(in.Versions) != 4 {
		t.Fatalf("ParseCrates = %+v", in)
	}
	v, _ := in.Lookup("1.0.101")
	if !v.Yanked || v.Artifact != "https://static.crates.io/crates/serde/1.0.101/download" {
		t.Errorf("ParseCrates: 1.0.101 = %+v, want yanked with the static.crates.io download", v)
	}
	if v, _ := in.Lookup("1.0.0"); !v.Published.IsZero() {
		t.Errorf("ParseCrates: 1.0.0 = %+v, want no publish time (old entries have no pubtime)", v)
	}
}

func TestParseMalformed(t *testing.T) {
	const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		name  string
		parse func() error
	}{
		{"npm not json", func() error { _, err := ParseNpm("a", []byte("<html>")); return err }},
		{"npm no name", func() error { _, err := ParseNpm("a", []byte(`{"versions":{}}`)); return err }},
		{"npm another package", func() error { _, err := ParseNpm("a", []byte(`{"name":"b","versions":{}}`)); return err }},
		{"npm bad time", func() error {
			_, err := ParseNpm("a", []byte(`{"name":"a","versions":{"1.0.0":{}},"time":{"1.0.0":"yesterday"}}`))
			return err
		}},
		{"npm time not a string", func() error {
			_, err := ParseNpm("a", []byte(`{"name":"a","versions":{"1.0.0":{}},"time":{"1.0.0":5}}`))
			return err
		}},
		{"npm empty version", func() error { _, err := ParseNpm("a", []byte(`{"name":"a","versions":{"":{}}}`)); return err }},
		{"pypi html", func() error { _, err := ParsePyPI("a", []byte("<!DOCTYPE html>"), pypiBase); return err }},
		{"pypi no api version", func() error { _, err := ParsePyPI("a", []byte(`{"name":"a","files":[]}`), pypiBase); return err }},
		{"pypi another project", func() error {
			_, err := ParsePyPI("a", []byte(`{"meta":{"api-version":"1.1"},"name":"b","files":[]}`), pypiBase)
			return err
		}},
		{"pypi bad upload time", func() error {
			_, err := ParsePyPI("a", []byte(`{"meta":{"api-version":"1.1"},"name":"a","files":[{"filename":"a-1.0.tar.gz","url":"a-1.0.tar.gz","upload-time":"x"}]}`), pypiBase)
			return err
		}},
		{"pypi empty version", func() error {
			_, err := ParsePyPI("a", []byte(`{"meta":{"api-version":"1.1"},"name":"a","versions":[""]}`), pypiBase)
			return err
		}},
		{"crates bad line", func() error {
			_, err := ParseCrates("a", []byte("{\"name\":\"a\",\"vers\":\"1.0.0\",\"cksum\":\""+sum+"\"}\nnot json\n"), "")
			return err
		}},
		{"crates mixed names", func() error {
			_, err := ParseCrates("a", []byte("{\"name\":\"a\",\"vers\":\"1.0.0\",\"cksum\":\""+sum+"\"}\n{\"name\":\"b\",\"vers\":\"1.0.0\",\"cksum\":\""+sum+"\"}\n"), "")
			return err
		}},
		{"crates bad cksum", func() error {
			_, err := ParseCrates("a", []byte(`{"name":"a","vers":"1.0.0","cksum":"aaaa"}`), "")
			return err
		}},
		{"crates version twice", func() error {
			_, err := ParseCrates("a", []byte("{\"name\":\"a\",\"vers\":\"1.0.0\",\"cksum\":\""+sum+"\"}\n{\"name\":\"a\",\"vers\":\"1.0.0+b\",\"cksum\":\""+sum+"\"}\n"), "")
			return err
		}},
		{"crates bad pubtime", func() error {
			_, err := ParseCrates("a", []byte(`{"name":"a","vers":"1.0.0","cksum":"`+sum+`","pubtime":"x"}`), "")
			return err
		}},
		{"crates empty", func() error { _, err := ParseCrates("a", nil, ""); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.parse(); !errors.Is(err, ErrMalformed) {
				t.Errorf("%s = %v, want ErrMalformed", tt.name, err)
			}
		})
	}
}

// tagged is an Info listing versions, as --versions gives them.
func tagged(versions ...string) *Info {
	in := &Info{Name: "x"}
	for _, v := range versions {
		in.Versions = append(in.Versions, Version{Version: v})
	}
	return in
}

func TestResolve(t *testing.T) {
	npm, err := ParseNpm("left-pad", mustRead(t, "npm-left-pad.json"))
	if err != nil {
		t.Fatal(err)
	}
	pypi, err := ParsePyPI("requests", mustRead(t, "pypi-requests.json"), pypiBase)
	if err != nil {
		t.Fatal(err)
	}
	crates, err := ParseCrates("serde", mustRead(t, "crates-serde"), "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   *Info
		eco  string
		spec string
		want string
		err  bool
	}{
		{name: "npm caret", in: npm, eco: "npm", spec: "^1.1.0", want: "1.3.0"},
		{name: "npm tilde", in: npm, eco: "npm", spec: "~1.2.0", want: "1.2.0"},
		{name: "npm empty is latest", in: npm, eco: "npm", spec: "", want: "1.3.0"},
		{name: "npm dist-tag", in: npm, eco: "npm", spec: "next", want: "2.0.0-beta.1"},
		{name: "npm exact", in: npm, eco: "npm", spec: "1.1.3", want: "1.1.3"},
		{name: "npm no match", in: npm, eco: "npm", spec: "^9", err: true},
		{name: "pypi skips yanked and pre-releases", in: pypi, eco: "pypi", spec: ">=2.31,<3", want: "2.32.3"},
		{name: "pypi pinned", in: pypi, eco: "pypi", spec: "==2.31.0", want: "2.31.0"},
		{name: "cargo caret skips yanked", in: crates, eco: "cargo", spec: "1.0.100", want: "1.0.215"},
		{name: "cargo exact", in: crates, eco: "cargo", spec: "=1.0.100", want: "1.0.100"},
		{name: "cargo empty is highest", in: crates, eco: "cargo", spec: "", want: "1.0.215"},
		{name: "pypi empty is highest", in: tagged("2.31.0", "not a version", "2.32.3"), eco: "pypi", spec: "", want: "2.32.3"},
		{name: "pypi empty skips an unparsable first", in: tagged("x y", "2.31.0"), eco: "pypi", spec: "", want: "2.31.0"},
		{name: "deb relation", in: tagged("7.88.1-9", "7.88.1-10+deb12u5"), eco: "deb", spec: ">= 7.88.1-10", want: "7.88.1-10+deb12u5"},
		{name: "oci tag", in: tagged("3.18", "3.19"), eco: "oci", spec: "3.19", want: "3.19"},
		{name: "oci empty is latest", in: tagged("3.19", "latest"), eco: "oci", spec: "", want: "latest"},
		{name: "oci unlisted tag", in: tagged("3.19"), eco: "oci", spec: "3.20", err: true},
		{name: "unknown ecosystem", in: tagged("1.0"), eco: "gem", spec: "1.0", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := tt.in.Resolve(tt.eco, tt.spec)
			if tt.err {
				if err == nil {
					t.Errorf("Resolve(%s, %q) = %s, want an error", tt.eco, tt.spec, v.Version)
				}
				return
			}
			if err != nil || v.Version != tt.want {
				t.Errorf("Resolve(%s, %q) = %s, %v, want %s", tt.eco, tt.spec, v.Version, err, tt.want)
			}
		})
	}
}

// TestFetch serves each ecosystem's real protocol from an httptest server
// and checks what the Fetcher asks for and reads.
func TestFetch(t *testing.T) {
	var seen []string
	mux := http.NewServeMux()
	mux.HandleFunc("/npm/@scope%2Fleft-pad", func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, "npm accept="+r.Header.Get("Accept"))
		w.Header().Set("Content-Type", "application/json")
		w.Write(bytes.ReplaceAll(mustRead(t, "npm-left-pad.json"), []byte(`"left-pad"`), []byte(`"@scope/left-pad"`)))
	})
	mux.HandleFunc("/simple/python-dateutil/", func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, "pypi accept="+r.Header.Get("Accept"))
		w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
		page := bytes.ReplaceAll(mustRead(t, "pypi-requests.json"), []byte(`"requests"`), []byte(`"python-dateutil"`))
		w.Write(bytes.ReplaceAll(page, []byte("requests-"), []byte("python_dateutil-")))
	})
	mux.HandleFunc("/simple/htmlonly/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html></html>"))
	})
	mux.HandleFunc("/index/config.json", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"dl":"https://static.crates.io/crates","api":"https://crates.io"}`))
	})
	mux.HandleFunc("/index/se/rd/serde", func(w http.ResponseWriter, r *http.Request) {
		w.Write(mustRead(t, "crates-serde"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f := New(WithClient(srv.Client()))
	ctx := context.Background()

	in, err := f.Fetch(ctx, "npm", srv.URL+"/npm", "@scope/left-pad")
	if err != nil || in.Tags["latest"] != "1.3.0" {
		t.Errorf("Fetch(npm) = %+v, %v", in, err)
	}
	in, err = f.Fetch(ctx, "pypi", srv.URL+"/simple/", "Python_DateUtil")
	if err != nil || len(in.Versions) != 4 {
		t.Errorf("Fetch(pypi) = %+v, %v", in, err)
	} else if v, _ := in.Lookup("2.32.0"); v.Artifact != srv.URL+"/packages/python_dateutil-2.32.0-py3-none-any.whl" {
		t.Errorf("Fetch(pypi): relative URL resolved to %q", v.Artifact)
	}
	in, err = f.Fetch(ctx, "cargo", "sparse+"+srv.URL+"/index/", "serde")
	if err != nil || len(in.Versions) != 4 {
		t.Errorf("Fetch(cargo) = %+v, %v", in, err)
	} else if v, _ := in.Lookup("1.0.215"); v.Artifact != "https://static.crates.io/crates/serde/1.0.215/download" {
		t.Errorf("Fetch(cargo): artifact %q", v.Artifact)
	}
	if got := strings.Join(seen, "; "); got != "npm accept=application/json; pypi accept=application/vnd.pypi.simple.v1+json" {
		t.Errorf("requests = %s", got)
	}

	errTests := []struct {
		name, eco, registry, pkg string
		want                     error
	}{
		{"not found", "npm", srv.URL + "/npm/", "nope", ErrNotFound},
		{"html instead of json", "pypi", srv.URL + "/simple/", "htmlonly", ErrMalformed},
		{"deb", "deb", srv.URL, "curl", ErrUnsupported},
		{"oci", "oci", srv.URL, "library/alpine", ErrUnsupported},
		{"unknown ecosystem", "gem", srv.URL, "rails", ErrUnsupported},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.Fetch(ctx, tt.eco, tt.registry, tt.pkg); !errors.Is(err, tt.want) {
				t.Errorf("Fetch(%s, %s) = %v, want %v", tt.eco, tt.pkg, err, tt.want)
			}
		})
	}
	if _, err := f.Fetch(ctx, "npm", "ftp://x/", "a"); err == nil {
		t.Errorf("Fetch(ftp registry) = nil error, want one")
	}
	if _, err := f.Fetch(ctx, "cargo", srv.URL+"/index/", "../etc"); err == nil {
		t.Errorf("Fetch(cargo, ../etc) = nil error, want one")
	}
}

// FuzzParseNpm: what parses names the package asked for.
func FuzzParseNpm(f *testing.F) {
	f.Add(bytes.ReplaceAll(mustRead(f, "npm-left-pad.json"), []byte("left-pad"), []byte("a")))
	f.Add([]byte(`{"name":"a","versions":{"":{}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ParseNpm("a", data)
		if err == nil && in.Name != "a" {
			t.Fatalf("ParseNpm(a) accepted a packument of %q", in.Name)
		}
	})
}

// FuzzParsePyPI: what parses has no empty version.
func FuzzParsePyPI(f *testing.F) {
	f.Add(bytes.ReplaceAll(mustRead(f, "pypi-requests.json"), []byte("requests"), []byte("a")))
	base, _ := url.Parse("https://pypi.org/simple/a/")
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ParsePyPI("a", data, base)
		if err == nil {
			for _, v := range in.Versions {
				if v.Version == "" {
					t.Fatalf("ParsePyPI made an empty version")
				}
			}
		}
	})
}

// FuzzParseCrates: what parses is the crate asked for, with a version.
func FuzzParseCrates(f *testing.F) {
	f.Add(bytes.ReplaceAll(mustRead(f, "crates-serde"), []byte(`"serde"`), []byte(`"a"`)), "https://static.crates.io/crates")
	f.Add([]byte(`{"name":"a","vers":"1.0.0","cksum":"`+strings.Repeat("0", 64)+`"}`), "https://x/{prefix}/{crate}")
	f.Fuzz(func(t *testing.T, data []byte, dl string) {
		in, err := ParseCrates("a", data, dl)
		if err == nil && (strings.ToLower(in.Name) != "a" || len(in.Versions) == 0) {
			t.Fatalf("ParseCrates = %+v without error", in)
		}
	})
}
