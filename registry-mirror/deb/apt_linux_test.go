package deb_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	mirror "github.com/sandtrail/sandtrail/registry-mirror"
	"github.com/sandtrail/sandtrail/registry-mirror/deb"
	"github.com/sandtrail/sandtrail/registry-mirror/deb/debtest"
)

// needApt skips unless apt-get and gpgv are here and the test runs as
// root (apt's scratch state still needs root for its sandbox user).
func needApt(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("apt-get needs root")
	}
	for _, tool := range []string{"apt-get", "gpgv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
}

type recorder struct {
	mu  sync.Mutex
	evs []*event.Event
}

func (r *recorder) emit(e *event.Event) { r.mu.Lock(); r.evs = append(r.evs, e); r.mu.Unlock() }

// fetches are the pkg.fetch events of the ecosystem deb.
func (r *recorder) fetches() []*event.Pkg {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*event.Pkg
	for _, e := range r.evs {
		if e.Kind == event.KindPkgFetch && e.Pkg.Ecosystem == "deb" {
			out = append(out, e.Pkg)
		}
	}
	return out
}

// counting counts the bytes the mirror reads from its upstreams.
type counting struct {
	n atomic.Int64
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		resp.Body = &countBody{resp.Body, &c.n}
	}
	return resp, err
}

type countBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// startMirror serves a mirror with upstreams on 127.0.0.1; the policy
// approves registries.
func startMirror(t *testing.T, upstreams map[string]string, registries ...string) (string, *recorder, *counting) {
	t.Helper()
	p, err := policies.Parse("t.yaml", []byte("sources:\n  registries:\n    deb: ["+strings.Join(registries, ", ")+"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policies.New(p)
	if err != nil {
		t.Fatal(err)
	}
	rec, cnt := &recorder{}, &counting{}
	m, err := mirror.New(mirror.Config{CacheDir: t.TempDir(), Upstreams: upstreams, Policy: eng, Emit: rec.emit, Host: "h1",
		Log: hclog.NewNullLogger(), HTTP: &http.Client{Transport: cnt}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx, ln, time.Second) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String(), rec, cnt
}

// apt is a scratch apt: its own state, cache, sources and configuration,
// none of the system's (APT_CONFIG replaces apt.conf and its parts).
type apt struct {
	dir string
}

func newApt(t *testing.T, source, proxy string) *apt {
	t.Helper()
	a := &apt{dir: t.TempDir()}
	if proxy == "" {
		proxy = "DIRECT"
	}
	debtest.ScratchApt(t, a.dir, source, proxy, "")
	return a
}

// run runs apt-get args in the scratch state; it returns the output and
// whether apt-get succeeded.
func (a *apt) run(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-q"}, args...)...)
	cmd.Dir = filepath.Join(a.dir, "dl")
	cmd.Env = []string{"APT_CONFIG=" + filepath.Join(a.dir, "apt.conf"), "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// downloaded is the sha256 of the one .deb of name in the download
// directory, or "".
func (a *apt) downloaded(t *testing.T, name string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(a.dir, "dl", name+"_*.deb"))
	if len(m) != 1 {
		return ""
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// servedDeb finds the last record of a served, verified .deb of name
// whose hash is sum.
func servedDeb(rec *recorder, name, sum string) *event.Pkg {
	var found *event.Pkg
	for _, p := range rec.fetches() {
		if p.Name == name && p.Outcome == "served" && p.Verified != nil && *p.Verified && p.Hash == "sha256:"+sum {
			found = p
		}
	}
	return found
}

// TestAptDebian: a real apt-get update and apt-get download hello through
// the mirror from Debian's archive, in HTTP-proxy mode and in remap mode,
// each with a mirror of its own (a cold cache); the .deb is verified
// against bookworm's signed chain and recorded.
func TestAptDebian(t *testing.T) {
	needApt(t)
	if testing.Short() {
		t.Skip("fetches bookworm's main amd64 indexes from deb.debian.org (about 9 MB a mode)")
	}
	const keyring = deb.DefaultKeyring
	modes := []struct{ name, source string }{
		{"proxy", "deb [signed-by=" + keyring + "] http://deb.debian.org/debian bookworm main"},
		{"remap", "deb [signed-by=" + keyring + "] http://ADDR/debian/debian bookworm main"},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			addr, rec, cnt := startMirror(t, nil, deb.DefaultUpstream)
			proxy := ""
			if mode.name == "proxy" {
				proxy = "http://" + addr + "/"
			}
			a := newApt(t, strings.Replace(mode.source, "ADDR", addr, 1), proxy)
			start := time.Now()
			if out, ok := a.run(t, "update"); !ok || strings.Contains(out, "W:") {
				t.Fatalf("apt-get update failed:\n%s", out)
			}
			t.Logf("%s: apt-get update took %v; the mirror read %d bytes from Debian", mode.name, time.Since(start).Round(time.Millisecond), cnt.n.Load())
			start = time.Now()
			if out, ok := a.run(t, "download", "hello"); !ok {
				t.Fatalf("apt-get download hello failed:\n%s", out)
			}
			sum := a.downloaded(t, "hello")
			p := servedDeb(rec, "hello", sum)
			if sum == "" || p == nil || !strings.HasPrefix(p.SourceURL, "http://deb.debian.org/debian/pool/main/h/hello/") || p.Resolved == "" {
				t.Fatalf("no verified, served record of the downloaded hello (%s): %+v", sum, rec.fetches())
			}
			t.Logf("%s: apt-get download took %v: hello %s, %d bytes, %s", mode.name, time.Since(start).Round(time.Millisecond), p.Resolved, p.Bytes, p.Hash)
		})
	}
}

// TestAptFixture: through the mirror in remap mode, apt-get update and
// apt-get download of a fixture archive succeed, and each broken link of
// the chain (the InRelease's signature, the Packages file, the .deb, a
// Valid-Until in the past) makes apt-get fail and is recorded.
func TestAptFixture(t *testing.T) {
	needApt(t)
	tests := []struct {
		name    string
		opts    debtest.Options
		corrupt []string // "deb": the hello .deb
		outcome string   // of the record that explains the failure; "": none, apt succeeds
	}{
		{name: "good"},
		{name: "bad InRelease signature", corrupt: []string{"dists/stable/InRelease"}, outcome: "signature_invalid"},
		{name: "corrupted Packages", corrupt: []string{"dists/stable/main/binary-amd64/Packages.gz", "dists/stable/main/binary-amd64/Packages"}, outcome: "hash_mismatch"},
		{name: "corrupted deb", corrupt: []string{"deb"}, outcome: "hash_mismatch"},
		{name: "Valid-Until passed", opts: debtest.Options{ValidUntil: time.Now().Add(-time.Hour)}, outcome: "signature_invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arch := debtest.Start(t, tt.opts, debtest.Package{Name: "hello", Version: "2.10-3"})
			for _, c := range tt.corrupt {
				if c == "deb" {
					c = arch.Debs["hello"]
				}
				arch.Corrupt(c)
			}
			addr, rec, _ := startMirror(t, map[string]string{"deb/fixture": "[signed-by=" + arch.Keyring + "] " + arch.URL}, arch.URL)
			a := newApt(t, "deb [signed-by="+arch.Keyring+"] http://"+addr+"/debian/fixture stable main", "")
			upOut, upOK := a.run(t, "update")
			dlOut, dlOK := a.run(t, "download", "hello")
			sum := a.downloaded(t, "hello")
			if tt.outcome == "" {
				if !upOK || !dlOK || servedDeb(rec, "hello", sum) == nil {
					t.Fatalf("update ok=%v, download ok=%v, records %+v\n%s\n%s", upOK, dlOK, rec.fetches(), upOut, dlOut)
				}
				return
			}
			if dlOK || sum != "" {
				t.Fatalf("apt-get download succeeded through a broken chain:\n%s\n%s", upOut, dlOut)
			}
			var found bool
			for _, p := range rec.fetches() {
				found = found || (p.Outcome == tt.outcome && (p.Verified == nil || !*p.Verified))
			}
			if !found {
				t.Errorf("no %s record: %+v\n%s\n%s", tt.outcome, rec.fetches(), upOut, dlOut)
			}
			t.Logf("apt-get update ok=%v:\n%s", upOK, lastLines(upOut, 4))
		})
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
