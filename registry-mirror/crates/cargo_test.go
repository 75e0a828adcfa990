package crates_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	mirror "github.com/sandtrail/sandtrail/registry-mirror"
	"github.com/sandtrail/sandtrail/registry-mirror/crates"
	"github.com/sandtrail/sandtrail/registry-mirror/crates/cratestest"
)

// events collects a mirror's events.
type events struct {
	mu       sync.Mutex
	evs      []*event.Event
	statuses []string // "<status> <path>" of each response
}

func (e *events) emit(ev *event.Event) { e.mu.Lock(); e.evs = append(e.evs, ev); e.mu.Unlock() }

// of returns the events of kind, by name@version (pkg.fetch) or name.
func (e *events) of(kind string) map[string][]*event.Pkg {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string][]*event.Pkg{}
	for _, ev := range e.evs {
		if ev.Kind != kind {
			continue
		}
		k := ev.Pkg.Name
		if ev.Pkg.Resolved != "" {
			k += "@" + ev.Pkg.Resolved
		}
		out[k] = append(out[k], ev.Pkg)
	}
	return out
}

// startMirror runs the whole mirror in-process on 127.0.0.1, with reg as
// the crates upstream, a policy approving it and a 48h cooldown. Its
// metadata is always revalidated upstream, so that an upstream cut off
// shows as stale metadata.
func startMirror(t *testing.T, reg *cratestest.Registry) (string, *events) {
	t.Helper()
	p, err := policies.Parse("t.yaml", []byte(fmt.Sprintf("sources:\n  registries:\n    cargo: [%s/]\ncooldown:\n  min_age: 48h\n  action: block\n", reg.URL)))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policies.New(p)
	if err != nil {
		t.Fatal(err)
	}
	evs := &events{}
	m, err := mirror.New(mirror.Config{CacheDir: t.TempDir(), Upstreams: map[string]string{crates.Ecosystem: reg.URL + "/"},
		MetaTTL: time.Nanosecond, Policy: eng, Emit: evs.emit, Host: "h1", Log: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		m.ServeHTTP(sw, r)
		evs.mu.Lock()
		evs.statuses = append(evs.statuses, fmt.Sprintf("%d %s", sw.status, r.URL.Path))
		evs.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv.URL, evs
}

// statusWriter keeps the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

// count returns how many responses had status and path.
func (e *events) count(status int, path string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, s := range e.statuses {
		if s == fmt.Sprintf("%d %s", status, path) {
			n++
		}
	}
	return n
}

// project is a cargo project depending on deps (Cargo.toml lines).
func project(t *testing.T, deps ...string) string {
	t.Helper()
	dir := t.TempDir()
	toml := "[package]\nname = \"p\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n" + strings.Join(deps, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "Cargo.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "lib.rs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// cargo runs cargo ARGS in dir with crates.io replaced by the mirror, a
// CARGO_HOME of its own and none of the caller's cargo environment, so
// that it talks to the mirror on loopback and nothing else.
func cargo(t *testing.T, bin, home, mirrorURL, dir string, args ...string) (string, error) {
	t.Helper()
	full := append([]string{"--config", `source.crates-io.replace-with="m"`,
		"--config", fmt.Sprintf(`source.m.registry="sparse+%s/crates/index/"`, mirrorURL)}, args...)
	cmd := exec.Command(bin, full...)
	cmd.Dir = dir
	rustup := os.Getenv("RUSTUP_HOME")
	if rustup == "" {
		h, _ := os.UserHomeDir()
		rustup = filepath.Join(h, ".rustup")
	}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CARGO_HOME=" + filepath.Join(home, "cargo"),
		"RUSTUP_HOME=" + rustup, "CARGO_NET_RETRY=0", "CARGO_HTTP_TIMEOUT=60", "CARGO_TERM_COLOR=never"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestCargoFetch is the mirror's cargo case: a real `cargo fetch` of a
// project through the mirror from a loopback fixture index, every .crate
// verified and recorded with the checksum cargo wrote into Cargo.lock;
// the version inside the cooldown is hidden (a range resolves below it,
// and its filtering names the rule). cargo's revalidation of its cached
// index files gets 304s. A second fetch in a new CARGO_HOME
// with the upstream cut off is served from the mirror's cache, on stale
// metadata.
func TestCargoFetch(t *testing.T) {
	bin := cratestest.Cargo(t)
	reg := cratestest.Start(t, fixtureCrates()...)
	url, evs := startMirror(t, reg)
	dir := project(t, `mid = "0.2"`, `x = "0.1"`, `xy = "0.1"`)
	home := t.TempDir()
	if out, err := cargo(t, bin, home, url, dir, "fetch"); err != nil {
		t.Fatalf("cargo fetch through the mirror: %v\n%s", err, out)
	}
	lock, err := os.ReadFile(filepath.Join(dir, "Cargo.lock"))
	if err != nil {
		t.Fatal(err)
	}
	fetched := evs.of(event.KindPkgFetch)
	for _, c := range []struct{ name, version string }{{"mid", "0.2.0"}, {"leaf", "1.0.0"}, {"x", "0.1.0"}, {"xy", "0.1.0"}} {
		sum := cksum(c.name, c.version)
		if !strings.Contains(string(lock), fmt.Sprintf("name = %q\nversion = %q\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = %q", c.name, c.version, sum)) {
			t.Errorf("Cargo.lock lacks %s %s with checksum %s:\n%s", c.name, c.version, sum, lock)
		}
		ps := fetched[c.name+"@"+c.version]
		if len(ps) != 1 || ps[0].Outcome != "served" || ps[0].Verified == nil || !*ps[0].Verified || ps[0].Hash != "sha256:"+sum ||
			ps[0].Purl != "pkg:cargo/"+c.name+"@"+c.version || ps[0].Client == "" {
			t.Errorf("pkg.fetch of %s@%s = %s, want one, served and verified with hash %s", c.name, c.version, js(ps), sum)
		}
	}
	if len(fetched) != 4 {
		t.Errorf("pkg.fetch events for %d crates, want 4: %s", len(fetched), js(fetched))
	}
	filters := evs.of(event.KindPkgFilter)["leaf"]
	if len(filters) != 1 || len(filters[0].Removed) != 1 || filters[0].Removed[0].Version != "1.1.0" || filters[0].Removed[0].Rule != "cooldown.min_age" {
		t.Errorf("pkg.filter of leaf = %s, want 1.1.0 removed by cooldown.min_age", js(filters))
	}
	// Again in the same CARGO_HOME: cargo revalidates its cached index
	// files with If-None-Match, and the mirror answers 304.
	if out, err := cargo(t, bin, home, url, dir, "update"); err != nil {
		t.Fatalf("cargo update through the mirror: %v\n%s", err, out)
	}
	if n := evs.count(http.StatusNotModified, "/crates/index/le/af/leaf"); n != 1 {
		t.Errorf("leaf's index file was revalidated with a 304 %d times, want 1 (%v)", n, evs.statuses)
	}
	reg.Down(true)
	dir2 := project(t, `mid = "0.2"`, `x = "0.1"`, `xy = "0.1"`)
	os.WriteFile(filepath.Join(dir2, "Cargo.lock"), lock, 0o644)
	if out, err := cargo(t, bin, t.TempDir(), url, dir2, "fetch", "--locked"); err != nil {
		t.Fatalf("cargo fetch --locked with the upstream down: %v\n%s", err, out)
	}
	for k, ps := range evs.of(event.KindPkgFetch) {
		if len(ps) != 2 || ps[1].Cache != "hit" || !ps[1].MetadataStale {
			t.Errorf("second fetch of %s = %s, want a cache hit on stale metadata", k, js(ps))
		}
	}
}

// TestCargoRefused: a tampered crate makes cargo fail, with hash_mismatch
// recorded; a dependency pinned to the version inside the cooldown does
// not resolve.
func TestCargoRefused(t *testing.T) {
	bin := cratestest.Cargo(t)
	reg := cratestest.Start(t, fixtureCrates()...)
	reg.Tamper("x", "0.1.0")
	url, evs := startMirror(t, reg)
	out, err := cargo(t, bin, t.TempDir(), url, project(t, `x = "0.1"`), "fetch")
	if err == nil || !strings.Contains(out, "hash_mismatch") {
		t.Errorf("cargo fetch of a tampered crate: %v, want a failure naming hash_mismatch\n%s", err, out)
	}
	if ps := evs.of(event.KindPkgFetch)["x@0.1.0"]; len(ps) == 0 || ps[0].Outcome != "hash_mismatch" || (ps[0].Verified != nil && *ps[0].Verified) {
		t.Errorf("pkg.fetch of the tampered crate = %s, want hash_mismatch", js(ps))
	}
	out, err = cargo(t, bin, t.TempDir(), url, project(t, `leaf = "=1.1.0"`), "fetch")
	if err == nil || !strings.Contains(out, "candidate versions found which didn't match: 1.0.0") {
		t.Errorf("cargo fetch of leaf =1.1.0, inside the cooldown: %v, want a resolution failure\n%s", err, out)
	}
	if f := evs.of(event.KindPkgFilter)["leaf"]; len(f) != 1 || f[0].Removed[0].Rule != "cooldown.min_age" {
		t.Errorf("pkg.filter of leaf = %s, want 1.1.0 removed by cooldown.min_age", js(f))
	}
	if ps := evs.of(event.KindPkgFetch)["leaf@1.1.0"]; len(ps) != 0 {
		t.Errorf("cargo downloaded the hidden version: %s", js(ps))
	}
}

var old = time.Now().Add(-30 * 24 * time.Hour)

func fixtureCrates() []cratestest.Crate {
	return []cratestest.Crate{
		{Name: "leaf", Versions: []cratestest.Version{{Version: "1.0.0", Published: old}, {Version: "1.1.0", Published: time.Now().Add(-time.Hour)}}},
		{Name: "mid", Versions: []cratestest.Version{{Version: "0.2.0", Published: old, Deps: []cratestest.Dep{{Name: "leaf", Req: "^1"}}}}},
		{Name: "x", Versions: []cratestest.Version{{Version: "0.1.0", Published: old}}},
		{Name: "xy", Versions: []cratestest.Version{{Version: "0.1.0", Published: old}}},
	}
}

// cksum is the cksum of a fixture crate's version.
func cksum(name, version string) string {
	for _, c := range fixtureCrates() {
		for _, v := range c.Versions {
			if c.Name == name && v.Version == version {
				return cratestest.Cksum(cratestest.CrateFile(name, v))
			}
		}
	}
	return ""
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
