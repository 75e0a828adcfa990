//go:build linux

package session

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestSnapshot(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "a.txt"), []byte("hello"), 0o644)
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "s.tar")
	sum, err := snapshot(context.Background(), dir, dst)
	if err != nil {
		t.Fatalf("snapshot() = %v", err)
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
		t.Errorf("snapshot() sha256 = %s, want %x", sum, h)
	}
	f, _ := os.Open(dst)
	defer f.Close()
	got := map[string]string{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		c, _ := io.ReadAll(tr)
		switch h.Typeflag {
		case tar.TypeSymlink:
			got[h.Name] = "-> " + h.Linkname
		case tar.TypeDir:
			got[h.Name] = "dir"
		default:
			got[h.Name] = string(c)
		}
	}
	want := map[string]string{"sub/": "dir", "sub/a.txt": "hello", "link": "-> /etc/passwd"}
	if len(got) != len(want) {
		t.Errorf("snapshot entries = %v, want %v (no fifo, link not followed)", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("snapshot entry %q = %q, want %q", k, got[k], v)
		}
	}
	if _, err := snapshot(context.Background(), dir, dst); err == nil {
		t.Errorf("snapshot() over an existing file = nil, want an error")
	}
}

func TestCopyTree(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(src, "sub"), 0o750)
	os.WriteFile(filepath.Join(src, "sub", "a.txt"), []byte("hello"), 0o640)
	os.Symlink("/etc/passwd", filepath.Join(src, "link"))
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := copyTree(context.Background(), src, dst, nil); err != nil {
		t.Fatalf("copyTree() = %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "sub", "a.txt")); err != nil || string(b) != "hello" {
		t.Errorf("copied sub/a.txt = %q, %v, want hello", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "sub")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("copied sub: Stat() = %v, %v, want mode 0750", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "link")); err != nil || l != "/etc/passwd" {
		t.Errorf("copied link = %q, %v, want -> /etc/passwd, not followed", l, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "fifo")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("copied fifo: Lstat() = %v, want skipped", err)
	}
}
