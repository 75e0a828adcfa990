//go:build linux

package session

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

func TestDiskUsage(t *testing.T) {
	dir := t.TempDir()
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = 1
	}
	os.WriteFile(filepath.Join(dir, "a"), b, 0o644)
	os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "hardlink"))
	os.Symlink("/usr", filepath.Join(dir, "usr"))
	used, complete, err := diskUsage(dir, 1000)
	if err != nil || !complete {
		t.Fatalf("diskUsage() = %d, %v, %v", used, complete, err)
	}
	if used < 1<<20 || used > 1<<20+64<<10 {
		t.Errorf("diskUsage() = %d, want about 1 MiB (hard link counted once, symlink not followed)", used)
	}
	if _, complete, _ := diskUsage(dir, 2); complete {
		t.Errorf("diskUsage(cap 2) complete = true, want false")
	}
}
