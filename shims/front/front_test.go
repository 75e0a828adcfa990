package front

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want bool
	}{
		{"npm", []string{"--version"}, true},
		{"npm", []string{"view", "left-pad", "version"}, true},
		{"npm", []string{"view"}, true},
		{"npm", []string{"install"}, false},
		{"npm", []string{"--version", "install"}, false},
		{"npm", nil, false},
		{"npx", []string{"--version"}, false},
		{"pip3", []string{"list", "--outdated"}, true},
		{"pip", []string{"install", "x"}, false},
		{"cargo", []string{"-V"}, true},
		{"cargo", []string{"version"}, false},
		{"apt-get", []string{"update"}, false},
		{"apt", []string{"policy", "curl"}, true},
		{"sandtrail-shim", []string{"list"}, false},
	} {
		if got := ReadOnly(tc.name, tc.args); got != tc.want {
			t.Errorf("ReadOnly(%q, %q) = %v, want %v", tc.name, tc.args, got, tc.want)
		}
	}
}

func TestRealEnv(t *testing.T) {
	for name, want := range map[string]string{"apt-get": "SANDTRAIL_REAL_APT_GET", "pip3": "SANDTRAIL_REAL_PIP3", "a.b": "SANDTRAIL_REAL_A_B"} {
		if got := RealEnv(name); got != want {
			t.Errorf("RealEnv(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestName(t *testing.T) {
	for in, want := range map[string]string{"/usr/local/lib/sandtrail/shims/npm": "npm", "npm": "npm", "a/": "", "": ""} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLookup: the shim is skipped however it is linked (symlink, hard
// link), as are relative entries, directories and files that are not
// executable.
func TestLookup(t *testing.T) {
	dir := t.TempDir()
	mk := func(p string, mode os.FileMode) string {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shim := mk("bin/sandtrail-shim", 0o755)
	os.MkdirAll(filepath.Join(dir, "sym"), 0o755)
	os.MkdirAll(filepath.Join(dir, "hard"), 0o755)
	os.MkdirAll(filepath.Join(dir, "isdir/npm"), 0o755)
	if err := os.Symlink(shim, filepath.Join(dir, "sym/npm")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(shim, filepath.Join(dir, "hard/npm")); err != nil {
		t.Fatal(err)
	}
	mk("noexec/npm", 0o644)
	real := mk("real/npm", 0o755)
	self, err := os.Stat(shim)
	if err != nil {
		t.Fatal(err)
	}
	path := "bin:" + filepath.Join(dir, "sym") + "::" + filepath.Join(dir, "hard") + ":" + filepath.Join(dir, "isdir") + ":" +
		filepath.Join(dir, "noexec") + ":" + filepath.Join(dir, "real") + "/:" + filepath.Join(dir, "later")
	if got, ok := Lookup("npm", path, self); !ok || got != real {
		t.Errorf("Lookup(npm, %s) = %q, %v, want %q", path, got, ok, real)
	}
	if got, ok := Lookup("npm", filepath.Join(dir, "sym"), self); ok {
		t.Errorf("Lookup(npm, the shim's own directory) = %q, want none", got)
	}
}
