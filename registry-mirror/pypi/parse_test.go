package pypi

import (
	"errors"
	"io"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/resolver"
)

func pypiEco(t testing.TB) *resolver.Ecosystem {
	e, err := resolver.Lookup(resolver.PyPI)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var pageURL, _ = url.Parse("https://pypi.example/simple/demo-pkg/")

// TestParseProject: URLs resolve against the page's, files of other
// projects or with unreadable names are left out, yanked and core
// metadata take every form the specs give them.
func TestParseProject(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		name  string
		page  string
		files []string // name url version yanked metaSHA
		err   error
	}{
		{name: "relative URL", page: `{"meta":{"api-version":"1.1"},"name":"demo-pkg","files":[{"filename":"demo_pkg-1.0-py3-none-any.whl","url":"../../files/d.whl#sha256=x","hashes":{"sha256":"` + strings.ToUpper(sha) + `"}}]}`,
			files: []string{"demo_pkg-1.0-py3-none-any.whl https://pypi.example/files/d.whl 1.0 false "}},
		{name: "other host", page: `{"meta":{"api-version":"1.0"},"name":"Demo.Pkg","files":[{"filename":"demo-pkg-2.0rc1.tar.gz","url":"https://files.example/p/demo-pkg-2.0rc1.tar.gz","yanked":"bad"}]}`,
			files: []string{"demo-pkg-2.0rc1.tar.gz https://files.example/p/demo-pkg-2.0rc1.tar.gz 2.0rc1 true "}},
		{name: "metadata forms", page: `{"meta":{"api-version":"1.1"},"name":"demo-pkg","files":[
			{"filename":"demo_pkg-1-py3-none-any.whl","url":"/a","core-metadata":{"sha256":"` + sha + `"},"yanked":true},
			{"filename":"demo_pkg-2-py3-none-any.whl","url":"/b","dist-info-metadata":{"sha256":"` + sha + `"}},
			{"filename":"demo_pkg-3-py3-none-any.whl","url":"/c","data-dist-info-metadata":{"sha256":"` + sha + `"}},
			{"filename":"demo_pkg-4-py3-none-any.whl","url":"/d","core-metadata":true,"yanked":false}]}`,
			files: []string{"demo_pkg-1-py3-none-any.whl https://pypi.example/a 1 true " + sha, "demo_pkg-2-py3-none-any.whl https://pypi.example/b 2 false " + sha,
				"demo_pkg-3-py3-none-any.whl https://pypi.example/c 3 false " + sha, "demo_pkg-4-py3-none-any.whl https://pypi.example/d 4 false "}},
		{name: "files left out", page: `{"meta":{"api-version":"1.1"},"name":"demo-pkg","files":[
			{"filename":"evil-1.0-py3-none-any.whl","url":"/e"},
			{"filename":"../demo_pkg-1.0-py3-none-any.whl","url":"/e"},
			{"filename":"demo_pkg-1.0-py3-none-any.whl","url":"file:///etc/passwd"},
			{"filename":"demo_pkg-1.0.exe","url":"/e"},
			{"filename":"demo_pkg-not a version-py3-none-any.whl","url":"/e"},
			{"filename":"demo_pkg-1.0-py3-none-any.whl","url":"/first"},
			{"filename":"demo_pkg-1.0-py3-none-any.whl","url":"/second"}]}`,
			files: []string{"demo_pkg-1.0-py3-none-any.whl https://pypi.example/first 1.0 false "}},
		{name: "api version 2", page: `{"meta":{"api-version":"2.0"},"name":"demo-pkg","files":[]}`, err: ErrAPIVersion},
		{name: "no api version", page: `{"name":"demo-pkg","files":[]}`, err: ErrAPIVersion},
		{name: "other project", page: `{"meta":{"api-version":"1.0"},"name":"other","files":[]}`, err: ErrOtherName},
		{name: "not JSON", page: `<html>`, err: errAny},
		{name: "bad types", page: `{"meta":{"api-version":"1.0"},"name":"demo-pkg","files":[{"filename":7}]}`, err: errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parseProject(pypiEco(t), "demo-pkg", pageURL, []byte(tt.page))
			if tt.err != nil {
				if err == nil || (tt.err != errAny && !errors.Is(err, tt.err)) {
					t.Fatalf("parseProject = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range p.files {
				got = append(got, strings.Join([]string{f.name, f.url, f.version, boolString(f.yanked), f.metaSHA256}, " "))
			}
			if strings.Join(got, "\n") != strings.Join(tt.files, "\n") {
				t.Errorf("files =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.files, "\n"))
			}
		})
	}
}

var errAny = errors.New("any error")

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestFileVersion: versions from wheel and sdist names, with names that
// hold dashes, and names that are not the project's.
func TestFileVersion(t *testing.T) {
	tests := []struct {
		name, project, file, version string
		sdist                        bool
	}{
		{name: "wheel", project: "requests", file: "requests-2.31.0-py3-none-any.whl", version: "2.31.0"},
		{name: "wheel with build tag", project: "foo-bar", file: "foo_bar-1.0-1-cp311-cp311-manylinux_2_17_x86_64.whl", version: "1.0"},
		{name: "wheel local version", project: "x", file: "x-1.0+local.1-py3-none-any.whl", version: "1.0+local.1"},
		{name: "sdist with dashes", project: "python-dateutil", file: "python-dateutil-2.8.2.tar.gz", version: "2.8.2", sdist: true},
		{name: "sdist normalised", project: "zope-interface", file: "zope.interface-6.0.zip", version: "6.0", sdist: true},
		{name: "sdist pre-release", project: "x", file: "x-2.0b1.tar.bz2", version: "2.0b1", sdist: true},
		{name: "wheel of another project", project: "x", file: "y-1.0-py3-none-any.whl"},
		{name: "too few wheel fields", project: "x", file: "x-1.0-py3.whl"},
		{name: "sdist of another project", project: "x", file: "xy-1.0.tar.gz"},
		{name: "no version", project: "x", file: "x-.tar.gz"},
		{name: "not PEP 440", project: "x", file: "x-banana.tar.gz"},
		{name: "unknown extension", project: "x", file: "x-1.0.exe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, sdist, err := fileVersion(pypiEco(t), tt.project, tt.file)
			if v != tt.version || sdist != tt.sdist || (err == nil) != (tt.version != "") {
				t.Errorf("fileVersion(%q, %q) = %q, %v, %v, want %q, %v", tt.project, tt.file, v, sdist, err, tt.version, tt.sdist)
			}
		})
	}
}

// TestParseRoot: the names of the index of projects, bad ones left out.
func TestParseRoot(t *testing.T) {
	names, err := parseRoot(pypiEco(t), []byte(`{"meta":{"api-version":"1.0"},"projects":[{"name":"Django"},{"name":"-bad"},{"name":"a b"},{"name":"x_y"}]}`))
	if err != nil || strings.Join(names, " ") != "Django x_y" {
		t.Errorf("parseRoot = %v, %v, want Django x_y", names, err)
	}
	if _, err := parseRoot(pypiEco(t), []byte(`{"projects":[]}`)); !errors.Is(err, ErrAPIVersion) {
		t.Errorf("parseRoot without api-version = %v, want %v", err, ErrAPIVersion)
	}
}

func FuzzParseProject(f *testing.F) {
	eco := pypiEco(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseProject(eco, "demo-pkg", pageURL, b)
		if err != nil {
			return
		}
		h := &Handler{eco: eco, prefix: "/pypi/"}
		pg := h.page(p, p.files)
		if err := pageHTML.Execute(io.Discard, pg); err != nil {
			t.Fatalf("rendering a parsed page: %v", err)
		}
		for _, f := range p.files {
			if checkFilename(f.name) != nil || !strings.HasPrefix(f.url, "http") {
				t.Fatalf("parsed file %+v", *f)
			}
		}
	})
}

func FuzzParseRoot(f *testing.F) {
	eco := pypiEco(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		names, err := parseRoot(eco, b)
		if err != nil {
			return
		}
		if err := rootHTML.Execute(io.Discard, outIndex{Projects: []outProject{{Name: strings.Join(names, ",")}}}); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzFileVersion(f *testing.F) {
	eco := pypiEco(f)
	f.Fuzz(func(t *testing.T, project, file string) {
		v, _, err := fileVersion(eco, project, file)
		if err == nil && v == "" {
			t.Fatalf("fileVersion(%q, %q) gave no version and no error", project, file)
		}
	})
}

func FuzzNegotiate(f *testing.F) {
	f.Fuzz(func(t *testing.T, accept string) {
		r := httptest.NewRequest("GET", "/pypi/simple/", nil)
		r.Header.Set("Accept", accept)
		ct, err := negotiate(r)
		if err == nil && ct != typeJSON && ct != typeHTML && ct != typeText {
			t.Fatalf("negotiate(%q) = %q", accept, ct)
		}
	})
}
