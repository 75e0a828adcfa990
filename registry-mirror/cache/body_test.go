package cache

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// TestOpenBody: a blob is served with its bytes, a small one from memory;
// a blob whose file changed after it was committed (written in place,
// replaced, truncated, with its modification time put back or not) is
// ErrChanged and removed, never served; a small blob's verified bytes in
// memory are served until its file's next check finds it changed.
func TestOpenBody(t *testing.T) {
	smallData := bytes.Repeat([]byte("s"), 1000)
	largeData := bytes.Repeat([]byte("L"), maxSmall+1)
	for _, tt := range []struct {
		name     string
		data     []byte
		warm     bool // served once before the change: in memory when small
		due      bool // its file due its check after the change
		change   func(t *testing.T, path string)
		memory   bool
		wantErr  error
		wantGone bool
	}{
		{name: "small", data: smallData, memory: true},
		{name: "large", data: largeData},
		{name: "large, written in place", data: largeData, change: writeInPlace, wantErr: ErrChanged, wantGone: true},
		{name: "large, written in place, times put back", data: largeData, change: writeKeepTimes, wantErr: ErrChanged, wantGone: true},
		{name: "large, replaced, times put back", data: largeData, change: replaceKeepTimes, wantErr: ErrChanged, wantGone: true},
		{name: "small, truncated after it was read", data: smallData, warm: true, due: true, change: truncate, wantErr: ErrChanged, wantGone: true},
		// Its verified bytes, from memory, until its file's next check.
		{name: "small, truncated after it was read, not yet checked", data: smallData, warm: true, change: truncate, memory: true},
		{name: "small, written in place, times put back", data: smallData, change: writeKeepTimes, wantErr: ErrChanged, wantGone: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Open(t.TempDir(), 0)
			if err != nil {
				t.Fatal(err)
			}
			a, err := c.Put("k", bytes.NewReader(tt.data), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.warm {
				b, err := c.OpenBody(a.SHA256)
				if err != nil {
					t.Fatal(err)
				}
				b.Close()
			}
			if tt.change != nil {
				tt.change(t, c.blobPath(a.SHA256))
			}
			if tt.due {
				c.mu.Lock()
				c.small[a.SHA256].Value.(*small).checked = time.Time{} // due its check
				c.mu.Unlock()
			}
			b, err := c.OpenBody(a.SHA256)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("OpenBody = %v, want %v", err, tt.wantErr)
			}
			if err == nil {
				got, _ := io.ReadAll(b)
				b.Close()
				if !bytes.Equal(got, tt.data) || (b.File() == nil) != tt.memory {
					t.Errorf("OpenBody served %d bytes (from memory: %v), want the %d stored (from memory: %v)", len(got), b.File() == nil, len(tt.data), tt.memory)
				}
			}
			if _, err := os.Stat(c.blobPath(a.SHA256)); tt.wantGone != errors.Is(err, os.ErrNotExist) {
				t.Errorf("after OpenBody, the blob's file: %v, want removed: %v", err, tt.wantGone)
			}
		})
	}
}

func writeInPlace(t *testing.T, path string) {
	t.Helper()
	time.Sleep(10 * time.Millisecond) // a modification time of its own
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("evil"), 0); err != nil {
		t.Fatal(err)
	}
}

// writeKeepTimes writes the file in place and puts its times back.
func writeKeepTimes(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	writeInPlace(t, path)
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// replaceKeepTimes renames another file of the same size and times over
// the blob's.
func replaceKeepTimes(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	b[0] ^= 1
	tmp := path + ".evil"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string) {
	t.Helper()
	if err := os.Truncate(path, 10); err != nil {
		t.Fatal(err)
	}
}
