package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWheelOf(t *testing.T) {
	tests := []struct{ file, want string }{
		{"pip-23.0.1-py3-none-any.whl", "pip@23.0.1"},
		{"setuptools-66.1.1-py3-none-any.whl", "setuptools@66.1.1"},
		{"my_pkg-1.0-1-cp311-cp311-manylinux_2_17_x86_64.whl", "my_pkg@1.0"},
		{"pip-23.0.1-py3-none-any.whl.bak", ""},
		{"pip-23.0.1.whl", ""},
		{"pip--py3-none-any.whl", ""},
		{"a-1-2-3-4-5-6.whl", ""},
		{"README", ""},
	}
	for _, tt := range tests {
		got := ""
		if w, ok := wheelOf(tt.file); ok {
			got = w.Name + "@" + w.Version
		}
		if got != tt.want {
			t.Errorf("wheelOf(%q) = %q, want %q", tt.file, got, tt.want)
		}
	}
}

func FuzzWheelOf(f *testing.F) {
	f.Add("pip-23.0.1-py3-none-any.whl")
	f.Add("a-1-2-py3-none-any.whl")
	f.Fuzz(func(t *testing.T, file string) {
		w, ok := wheelOf(file)
		if !ok {
			return
		}
		if w.Name == "" || w.Version == "" || strings.Contains(w.Name, "-") || strings.Contains(w.Version, "-") ||
			!strings.HasPrefix(file, w.Name+"-"+w.Version+"-") {
			t.Fatalf("wheelOf(%q) = %+v", file, w)
		}
	})
}

// TestSystemWheels: only root's files in a directory root alone writes
// are listed; the test runs as root (as the host does) and hands files to
// another uid to see them skipped.
func TestSystemWheels(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the wheels' owner is what is checked")
	}
	base := t.TempDir()
	good := filepath.Join(base, "wheels")
	open := filepath.Join(base, "open")
	for _, d := range []string{good, open} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	write := func(p string, uid int, mode os.FileMode) {
		if err := os.WriteFile(p, nil, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(good, "pip-23.0.1-py3-none-any.whl"), 0, 0o644)
	write(filepath.Join(good, "setuptools-66.1.1-py3-none-any.whl"), 65534, 0o644) // not root's
	write(filepath.Join(good, "wheel-0.40.0-py3-none-any.whl"), 0, 0o666)          // anyone may write it
	write(filepath.Join(good, "notes.txt"), 0, 0o644)
	write(filepath.Join(open, "evil-1.0-py3-none-any.whl"), 0, 0o644) // in a directory anyone may write
	if err := os.Symlink(filepath.Join(open, "evil-1.0-py3-none-any.whl"), filepath.Join(good, "evil-2.0-py3-none-any.whl")); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(SystemWheels(good, open, filepath.Join(base, "absent*")))
	if want := "[{pip 23.0.1}]"; got != want {
		t.Errorf("SystemWheels = %s, want %s", got, want)
	}
}
