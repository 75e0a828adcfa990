package listing

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

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
			p, err := ParseProject("demo-pkg", pageURL, []byte(tt.page))
			if tt.err != nil {
				if err == nil || (tt.err != errAny && !errors.Is(err, tt.err)) {
					t.Fatalf("ParseProject = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range p.Files {
				got = append(got, strings.Join([]string{f.Name, f.URL, f.Version, boolString(f.Yanked), f.MetaSHA256}, " "))
			}
			if strings.Join(got, "\n") != strings.Join(tt.files, "\n") {
				t.Errorf("files =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.files, "\n"))
			}
		})
	}
	if _, err := ParseProject("demo-pkg", nil, []byte(`{"meta":{"api-version":"1.0"},"name":"demo-pkg"}`)); err == nil {
		t.Errorf("ParseProject without a page URL = nil error, want one")
	}
}

var errAny = errors.New("any error")

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestProjectTimes: upload times are read per file; one that does not
// parse is unknown, says why, and fails nothing.
func TestProjectTimes(t *testing.T) {
	p, err := ParseProject("demo-pkg", pageURL, []byte(`{"meta":{"api-version":"1.1"},"name":"demo-pkg","files":[
		{"filename":"demo_pkg-1.0.tar.gz","url":"/a","upload-time":"2024-05-29T15:37:49.123456Z"},
		{"filename":"demo_pkg-2.0.tar.gz","url":"/b","upload-time":"yesterday"},
		{"filename":"demo_pkg-3.0.tar.gz","url":"/c"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := time.Parse(time.RFC3339Nano, "2024-05-29T15:37:49.123456Z")
	if len(p.Files) != 3 || !p.Files[0].Uploaded.Equal(want) || !p.Files[1].Uploaded.IsZero() || !p.Files[2].Uploaded.IsZero() {
		t.Fatalf("files = %+v %+v %+v", p.Files[0], p.Files[1], p.Files[2])
	}
	if p.TimeErr == nil || !strings.Contains(p.TimeErr.Error(), "demo_pkg-2.0.tar.gz") {
		t.Errorf("TimeErr = %v, want the file whose upload-time does not parse", p.TimeErr)
	}
	if !p.Files[0].Sdist || p.ByName["demo_pkg-3.0.tar.gz"] != p.Files[2] {
		t.Errorf("files = %+v, want sdists found by name", p.Files)
	}
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
			v, sdist, err := FileVersion(tt.project, tt.file)
			if v != tt.version || sdist != tt.sdist || (err == nil) != (tt.version != "") {
				t.Errorf("FileVersion(%q, %q) = %q, %v, %v, want %q, %v", tt.project, tt.file, v, sdist, err, tt.version, tt.sdist)
			}
			if err != nil && !errors.Is(err, ErrBadFilename) {
				t.Errorf("FileVersion(%q, %q) = %v, want an error wrapping ErrBadFilename", tt.project, tt.file, err)
			}
		})
	}
}

// FuzzParseProject: any page parses without panicking; every file of a
// page that parses is a plain name of the project, at an absolute http(s)
// URL, of the version its name gives, found by its name.
func FuzzParseProject(f *testing.F) {
	f.Add([]byte(`{"meta":{"api-version":"1.1"},"name":"demo-pkg","files":[{"filename":"demo_pkg-1.0-py3-none-any.whl","url":"../x.whl#sha256=ab","hashes":{"sha256":"` + strings.Repeat("ab", 32) + `"},"yanked":"why","upload-time":"2024-01-01T00:00:00Z"}],"versions":["1.0"]}`))
	f.Add([]byte(`{"meta":{"api-version":"1.0"},"name":"Demo_Pkg","files":[{"filename":"demo-pkg-1.0.tar.gz","url":"https://h/a","core-metadata":{"sha256":"00"}},{"filename":"demo-pkg-1.0.tar.gz","url":"::"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseProject("demo-pkg", pageURL, b)
		if err != nil {
			return
		}
		if len(p.ByName) != len(p.Files) {
			t.Fatalf("%d files, %d by name", len(p.Files), len(p.ByName))
		}
		for _, f := range p.Files {
			u, err := url.Parse(f.URL)
			if CheckFilename(f.Name) != nil || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
				t.Fatalf("parsed file %+v", *f)
			}
			if v, sdist, err := FileVersion(p.Name, f.Name); err != nil || v != f.Version || sdist != f.Sdist || p.ByName[f.Name] != f {
				t.Fatalf("parsed file %+v: FileVersion = %q, %v, %v", *f, v, sdist, err)
			}
			if f.SHA256 != "" && hexSHA256(f.SHA256) != f.SHA256 {
				t.Fatalf("parsed file %+v: sha256 is not lower-case hex", *f)
			}
		}
	})
}

func FuzzFileVersion(f *testing.F) {
	f.Fuzz(func(t *testing.T, project, file string) {
		v, _, err := FileVersion(project, file)
		if err == nil && v == "" {
			t.Fatalf("FileVersion(%q, %q) gave no version and no error", project, file)
		}
	})
}
