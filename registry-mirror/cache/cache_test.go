package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// failing is a reader that fails after its bytes, as a verifier does on a
// mismatch.
type failing struct{ r io.Reader }

var errBad = errors.New("bad digest")

func (f failing) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errBad
	}
	return n, err
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

func TestPutGet(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("the artifact")
	a, err := c.Put("https://up/x.tgz", bytes.NewReader(data), []string{"sha512-x"})
	if err != nil || a.SHA256 != sum(data) || a.Size != int64(len(data)) {
		t.Fatalf("Put = %+v, %v", a, err)
	}
	got, f, err := c.Get("https://up/x.tgz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(b, data) || got.Digests[0] != "sha512-x" {
		t.Errorf("Get = %+v %q", got, b)
	}
	// A failing verifier stores nothing.
	if _, err := c.Put("https://up/bad.tgz", failing{strings.NewReader("evil")}, nil); !errors.Is(err, errBad) {
		t.Errorf("Put(failing) = %v, want errBad", err)
	}
	if _, _, err := c.Get("https://up/bad.tgz"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(bad) = %v, want ErrNotFound", err)
	}
	if _, err := c.Open(sum([]byte("evil"))); !errors.Is(err, ErrNotFound) {
		t.Errorf("the failed blob exists: %v", err)
	}
	if tmps, _ := os.ReadDir(dir + "/tmp"); len(tmps) != 0 {
		t.Errorf("tmp/ holds %d files", len(tmps))
	}
	// Metadata.
	if err := c.PutMeta("pkg", Meta{Body: []byte("{}"), Fetched: time.Unix(100, 0)}); err != nil {
		t.Fatal(err)
	}
	// Reopened, it knows what it held.
	c2, err := Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st := c2.Stats(); st.Blobs != 1 || st.Bytes != int64(len(data)) {
		t.Errorf("Stats after reopen = %+v", st)
	}
	if m, err := c2.GetMeta("pkg"); err != nil || string(m.Body) != "{}" || !m.Fetched.Equal(time.Unix(100, 0)) {
		t.Errorf("GetMeta = %+v, %v", m, err)
	}
	if _, err := c2.GetMeta("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetMeta(nope) = %v", err)
	}
}

// TestEvict: past the bound the least recently used blob goes.
func TestEvict(t *testing.T) {
	c, err := Open(t.TempDir(), 25)
	if err != nil {
		t.Fatal(err)
	}
	put := func(k string) {
		if _, err := c.Put(k, strings.NewReader(strings.Repeat(k, 10)), nil); err != nil {
			t.Fatal(err)
		}
	}
	put("a")
	put("b")
	if _, f, err := c.Get("a"); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	put("c") // 30 bytes > 25: b, least recently used, goes
	for k, want := range map[string]bool{"a": true, "b": false, "c": true} {
		_, f, err := c.Get(k)
		if (err == nil) != want {
			t.Errorf("Get(%s) after eviction = %v, want present %v", k, err, want)
		}
		if f != nil {
			f.Close()
		}
	}
	if st := c.Stats(); st.Bytes != 20 || st.Blobs != 2 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestVerifyRemovesTamperedBlob finds and removes a blob whose bytes changed on disk.
func TestVerifyRemovesTamperedBlob(t *testing.T) {
	c, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.Put("a", strings.NewReader("aaaa"), nil)
	c.Put("b", strings.NewReader("bbbb"), nil)
	if err := os.WriteFile(c.blobPath(a.SHA256), []byte("tampered"), 0o600); err != nil {
		t.Fatal(err)
	}
	calls := 0
	bad, err := c.Verify(func(done, total int) { calls++ })
	if err != nil || len(bad) != 1 || bad[0] != a.SHA256 || calls != 2 {
		t.Fatalf("Verify = %v, %v (%d progress calls)", bad, err, calls)
	}
	if _, _, err := c.Get("a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(tampered) = %v, want ErrNotFound", err)
	}
}

func TestGroup(t *testing.T) {
	var g Group[int]
	var runs atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	results := make([]int, 20)
	do := func(i int) {
		defer wg.Done()
		v, err, _ := g.Do("k", func() (int, error) {
			runs.Add(1)
			<-release
			return 42, nil
		})
		if err != nil {
			t.Error(err)
		}
		results[i] = v
	}
	wg.Add(1)
	go do(0)
	for runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	for i := 1; i < len(results); i++ {
		wg.Add(1)
		go do(i)
	}
	for g.waiting("k") < len(results)-1 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if runs.Load() != 1 {
		t.Errorf("fn ran %d times, want 1", runs.Load())
	}
	for _, v := range results {
		if v != 42 {
			t.Fatalf("results = %v", results)
		}
	}
}
