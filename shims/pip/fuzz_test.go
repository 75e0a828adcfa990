package pip

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/shims"
)

// FuzzPlan: no argv panics the planner, and `install zzpkg ARGS` always
// plans a request for zzpkg.
func FuzzPlan(f *testing.F) {
	for _, s := range []string{"-i x a", "--index=x -r r.txt", "-qqUe .", "--report - a==1", "-- -x", "--extra=x --find=y",
		"--python install install", "a[x]>=1;python_version<'3'", "--rep=x a", "--report - --report=y", "--isolated -d x"} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, " ")
		c := shims.Context{Dir: dir, Getenv: func(string) string { return "" }, TempDir: dir}
		Plan(args, c)
		Plan(append([]string{"install"}, args...), c)
		Plan(append([]string{"download"}, args...), c)
		p, err := Plan(append([]string{"install", "zzpkg"}, args...), c)
		if err != nil {
			return // a -r file that does not exist
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

// FuzzRequirements: any requirements file parses without a panic, its
// nested files read through open.
func FuzzRequirements(f *testing.F) {
	f.Add([]byte("-r a.txt\n-c b.txt\na==1 \\\n --hash=sha256:0\n# c\n-e git+https://example.invalid/x#egg=x\n${HOME}b>=1"))
	f.Add([]byte("-i x\n--extra-index-url y\n-f z\n--no-index\nname @ https://example.invalid/n.whl ; os_name=='x'\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		open := func(p string) ([]byte, error) {
			if strings.HasSuffix(p, ".txt") {
				return b, nil
			}
			return nil, errors.New("no such file")
		}
		ParseRequirements("r.txt", b, open, func(string) string { return "V" })
	})
}

// FuzzReport: any report parses without a panic.
func FuzzReport(f *testing.F) {
	f.Add([]byte(`{"install":[{"metadata":{"name":"a","version":"1","requires_dist":["b"]},"download_info":{"url":"u","archive_info":{"hash":"sha256=00"}},"requested":true},{"metadata":{"name":"b","requires_dist":["a"]}}]}`))
	f.Add([]byte(`{"install":[{"download_info":{"archive_info":null}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseReport(b, []shims.Request{{Name: "a"}, {Source: "u"}})
	})
}

// FuzzINI: any pip.conf parses without a panic, and a file that parses
// gives options without one.
func FuzzINI(f *testing.F) {
	f.Add([]byte("[global]\nindex-url = x\n  y\n; c\n[install]\nfind_links: a b\n[DEFAULT]\nno-index=yes\n"))
	f.Add([]byte("[a] b]\nk=v\n\n\tk2\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := parseINI(b); err != nil {
			return
		}
		conf := filepath.Join(dir, "pip.conf")
		if err := os.WriteFile(conf, b, 0o644); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"PIP_CONFIG_FILE": conf, "XDG_CONFIG_DIRS": dir}
		c := shims.Context{Dir: dir, Getenv: func(k string) string { return env[k] }, TempDir: dir}
		Plan([]string{"install", "a"}, c)
	})
}
