package prefetch_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/record/event"
	mirror "github.com/sandtrail/sandtrail/registry-mirror"
	"github.com/sandtrail/sandtrail/registry-mirror/crates/cratestest"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch/fetchtest"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
	"github.com/sandtrail/sandtrail/registry-mirror/prefetch"
	"github.com/sandtrail/sandtrail/registry-mirror/pypi/pypitest"
)

var old = time.Now().Add(-30 * 24 * time.Hour)

// TestRun prefetches an npm lockfile, a requirements file and a Cargo.lock
// through a mirror of three fixture upstreams: every artifact is fetched
// once upstream (the cache is warm afterwards) and recorded by the
// mirror; an artifact whose lockfile hash differs from the registry's is
// reported, and a name the upstream lacks is an error.
func TestRun(t *testing.T) {
	npmUp := npmtest.Start(t, npmtest.Tree(3, 100)...)
	pyUp := pypitest.Start(t, pypitest.Project{Name: "tiny-pkg", Versions: []pypitest.Version{{Version: "1.0", Uploaded: old}}})
	crUp := cratestest.Start(t, cratestest.Crate{Name: "leaf", Versions: []cratestest.Version{{Version: "1.0.0", Published: old}}})
	eng := fetchtest.Policy(t, fmt.Sprintf("sources:\n  registries:\n    npm: [%s/]\n    pypi: [%s, %s/packages/]\n    cargo: [%s/]\n",
		npmUp.URL, pyUp.SimpleURL(), pyUp.Files.URL, crUp.URL))
	var evs events
	m, err := mirror.New(mirror.Config{CacheDir: t.TempDir(), Policy: eng, Log: hclog.NewNullLogger(),
		Upstreams: map[string]string{"npm": npmUp.URL, "pypi": pyUp.SimpleURL(), "cargo": crUp.URL + "/"},
		Emit:      evs.emit})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m)
	defer srv.Close()

	tgz := npmtest.Tarball("pkg-1", npmtest.Version{Version: "1.0.0", Files: map[string]string{"index.js": strings.Repeat("// x\n", 20)}})
	lock := fmt.Sprintf(`{"lockfileVersion":3,"packages":{"":{"name":"p"},
  "node_modules/pkg-1":{"version":"1.0.0","resolved":"https://registry.npmjs.org/pkg-1/-/pkg-1-1.0.0.tgz","integrity":%q},
  "node_modules/pkg-2":{"version":"1.0.0","resolved":"https://registry.npmjs.org/pkg-2/-/pkg-2-1.0.0.tgz","integrity":%q}}}`,
		npmtest.Integrity(tgz), npmtest.Integrity([]byte("something else")))
	wheel := pypitest.Wheel("tiny-pkg", pypitest.Version{Version: "1.0"})
	reqs := "# pinned\nTiny_Pkg==1.0 \\\n    --hash=sha256:" + pypitest.SHA256(wheel) + "\nrequests>=2\n"
	crate := cratestest.CrateFile("leaf", cratestest.Version{Version: "1.0.0"})
	sum := sha256.Sum256(crate)
	cargoLock := "version = 3\n\n[[package]]\nname = \"leaf\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"" +
		hex.EncodeToString(sum[:]) + "\"\n\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\n\n[[package]]\nname = \"gone\"\nversion = \"9.9.9\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n"
	var items []prefetch.Item
	for name, body := range map[string]string{"package-lock.json": lock, "requirements.txt": reqs, "Cargo.lock": cargoLock} {
		its, err := prefetch.Parse(name, []byte(body))
		if err != nil {
			t.Fatalf("Parse(%s) = %v", name, err)
		}
		items = append(items, its...)
	}
	f := &prefetch.Fetcher{HTTP: http.DefaultClient, Base: srv.URL + "/"}
	calls := 0
	res := f.Run(context.Background(), items, func(done, total int) { calls++ })
	got := map[string]error{}
	for _, r := range res {
		got[r.Ecosystem+":"+r.Name] = r.Err
		if r.Err == nil && (r.Files != 1 || r.Bytes == 0) {
			t.Errorf("%s: %d files, %d bytes", r.Name, r.Files, r.Bytes)
		}
	}
	for k, want := range map[string]string{"npm:pkg-1": "", "npm:pkg-2": "differs", "pypi:tiny-pkg": "", "cargo:leaf": "", "cargo:gone": "404"} {
		err, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s not prefetched: %v", k, got)
		case want == "" && err != nil, want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", k, err, want)
		}
	}
	if !errors.Is(got["npm:pkg-2"], prefetch.ErrLockMismatch) {
		t.Errorf("pkg-2's mismatch = %v, want ErrLockMismatch", got["npm:pkg-2"])
	}
	if calls != len(items) || len(items) != 5 {
		t.Errorf("%d items, %d progress calls, want 5 and 5", len(items), calls)
	}
	// Warm: the second run fetches nothing more upstream.
	before := npmUp.Count(npmtest.TarballPath("pkg-1", "1.0.0"))
	f.Run(context.Background(), items, nil)
	if n := npmUp.Count(npmtest.TarballPath("pkg-1", "1.0.0")); n != 1 || before != 1 {
		t.Errorf("pkg-1's tarball was fetched upstream %d times, want once", n)
	}
	// pkg-1, pkg-2 (the mirror serves it; only the lockfile disagrees),
	// tiny-pkg, leaf: twice each.
	if served := evs.served(8); served != 8 {
		t.Errorf("%d served pkg.fetch records, want 8", served)
	}
}

// events keeps the mirror's events. The mirror emits a served artifact's
// record after its last byte, so from its handler's goroutine while the
// client may already be reading the next: emit and served hold a lock.
type events struct {
	mu  sync.Mutex
	evs []*event.Event
}

func (e *events) emit(ev *event.Event) { e.mu.Lock(); e.evs = append(e.evs, ev); e.mu.Unlock() }

// served counts the served pkg.fetch records, waiting up to 10 s for want
// of them.
func (e *events) served(want int) int {
	n := 0
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		e.mu.Lock()
		n = 0
		for _, ev := range e.evs {
			if ev.Kind == event.KindPkgFetch && ev.Pkg.Outcome == "served" {
				n++
			}
		}
		e.mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			return n
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, file, body string
		want             []string // ecosystem:name@version path
		err              bool
	}{
		{name: "scoped npm", file: "package-lock.json",
			body: `{"packages":{"node_modules/a/node_modules/@s/b":{"version":"2.0.0","resolved":"https://r/@s/b/-/b-2.0.0.tgz"},"node_modules/l":{"link":true,"resolved":"x"}}}`,
			want: []string{"npm:@s/b@2.0.0 npm/@s%2fb/-/b-2.0.0.tgz"}},
		{name: "npm bad name", file: "package-lock.json", body: `{"packages":{"node_modules/../x":{"version":"1","resolved":"https://r/x/-/x-1.tgz"}}}`, err: true},
		{name: "npm not json", file: "npm-shrinkwrap.json", body: `{`, err: true},
		{name: "requirements", file: "req.txt", body: "a==1.0 ; python_version>'3'\nb[x]===2 # c\n-r other.txt\nc>=1\nhttps://x/y.whl\n",
			want: []string{"pypi:a@1.0 pypi/simple/a/", "pypi:b@2 pypi/simple/b/"}},
		{name: "requirements bad hash", file: "r.txt", body: "a==1 --hash=sha256:zz\n", err: true},
		{name: "cargo git skipped", file: "Cargo.lock", body: "[[package]]\nname = \"g\"\nversion = \"1.0.0\"\nsource = \"git+https://h/g#abc\"\n"},
		{name: "cargo bad version", file: "Cargo.lock", body: "[[package]]\nname = \"g\"\nversion = \"../x\"\nsource = \"registry+https://x\"\n", err: true},
		{name: "unknown file", file: "yarn.lock", body: "", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, err := prefetch.Parse(tt.file, []byte(tt.body))
			if (err != nil) != tt.err {
				t.Fatalf("Parse = %v, %v, want error %v", items, err, tt.err)
			}
			var got []string
			for _, it := range items {
				got = append(got, it.Ecosystem+":"+it.Name+"@"+it.Version+" "+it.Path)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("Parse = %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add("package-lock.json", []byte(`{"packages":{"node_modules/a":{"version":"1","resolved":"https://r/a/-/a-1.tgz","integrity":"sha512-AA=="}}}`))
	f.Add("requirements.txt", []byte("a==1 \\\n --hash=sha256:"+strings.Repeat("0", 64)+"\n"))
	f.Add("Cargo.lock", []byte("[[package]]\nname = \"a\"\nversion = \"1.0.0\"\nsource = \"registry+x\"\nchecksum = \"00\"\n"))
	f.Fuzz(func(t *testing.T, name string, b []byte) {
		items, err := prefetch.Parse(name, b)
		if err != nil {
			return
		}
		for _, it := range items {
			if strings.Contains(it.Path, "..") || strings.HasPrefix(it.Path, "/") || strings.Contains(it.Path, "://") {
				t.Fatalf("Parse(%q) gave the path %q", name, it.Path)
			}
		}
	})
}
