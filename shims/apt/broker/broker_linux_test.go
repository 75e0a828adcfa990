package broker_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/kernel/attribution/attributiontest"
	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/deb/debtest"
	"github.com/sandtrail/sandtrail/shims"
	"github.com/sandtrail/sandtrail/shims/apt"
	"github.com/sandtrail/sandtrail/shims/apt/broker"
)

// TestMain doubles as the hook (apt runs it) and as the client (run as
// nobody by the test).
func TestMain(m *testing.M) {
	attributiontest.Main()
	if os.Getenv("SANDTRAIL_TEST_APT_HOOK") != "" {
		if err := apt.RunHook(os.Stdin, os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, "hook:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if sock := os.Getenv("SANDTRAIL_TEST_APT_CLIENT"); sock != "" {
		exit, err := apt.Broker(sock, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		var r *apt.RefusedError
		if errors.As(err, &r) {
			fmt.Fprintln(os.Stderr, "REFUSED:", r.Message)
		} else if err != nil {
			fmt.Fprintln(os.Stderr, "ERROR:", err)
		}
		os.Exit(exit)
	}
	os.Exit(m.Run())
}

type recorder struct {
	mu  sync.Mutex
	evs []*event.Event
}

func (r *recorder) emit(e *event.Event) { r.mu.Lock(); r.evs = append(r.evs, e); r.mu.Unlock() }

func (r *recorder) take() []*event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.evs
	r.evs = nil
	return e
}

// proxy is a forward HTTP proxy standing in for the mirror; it counts
// requests.
type proxy struct {
	mu sync.Mutex
	n  int
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.n++
	p.mu.Unlock()
	if !r.URL.IsAbs() || !strings.HasPrefix(r.URL.Host, "127.0.0.1:") {
		http.Error(w, "loopback only", http.StatusForbidden)
		return
	}
	out, _ := http.NewRequest(r.Method, r.URL.String(), nil)
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (p *proxy) count() int { p.mu.Lock(); defer p.mu.Unlock(); return p.n }

// scratchApt writes an apt configuration with its own state, sources and
// a dpkg root of its own, so that nothing touches the system.
func scratchApt(t *testing.T, dir, source string) string {
	return debtest.ScratchApt(t, dir, source, "", filepath.Join(dir, "root"))
}

type fixture struct {
	sock, bin string
	rec       *recorder
	prx       *proxy
	arch      *debtest.Archive
	root      string
	// sess is the cgroup of session s1, where the client runs; other is
	// session s2's.
	sess, other *cgrouptest.Cgroup
}

// sessions is a session table.
type sessions map[uint64]string

func (s sessions) Lookup(id uint64) (string, bool) { v, ok := s[id]; return v, ok }

func start(t *testing.T) *fixture {
	if os.Geteuid() != 0 {
		t.Skip("the broker runs apt-get as root: the test needs root")
	}
	for _, tool := range []string{"apt-get", "gpgv", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir, err := os.MkdirTemp("", "aptbroker")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	f := &fixture{rec: &recorder{}, prx: &proxy{}, root: filepath.Join(dir, "apt", "root"), sess: cgrouptest.New(t), other: cgrouptest.New(t)}
	// The test binary, where nobody can run it.
	f.bin = filepath.Join(dir, "t.test")
	self, _ := os.ReadFile(os.Args[0])
	if err := os.WriteFile(f.bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	f.arch = debtest.Start(t, debtest.Options{}, debtest.Package{Name: "hello", Version: "2.10-3"},
		debtest.Package{Name: "fx-evil", Version: "1:1.0-1"})
	mirror := httptest.NewServer(f.prx)
	t.Cleanup(mirror.Close)
	conf := scratchApt(t, filepath.Join(dir, "apt"), "deb [signed-by="+f.arch.Keyring+"] "+f.arch.URL+" stable main")
	b, err := broker.New(broker.Config{AptGet: "/usr/bin/apt-get", Mirror: mirror.URL, HookCmd: f.bin, Emit: f.rec.emit,
		Env: []string{"APT_CONFIG=" + conf, "SANDTRAIL_TEST_APT_HOOK=1"}, DpkgStatus: filepath.Join(f.root, "var/lib/dpkg/status"),
		Attributor: attribution.New(sessions{f.sess.ID: "s1", f.other.ID: "s2"}),
		Check: func(_ context.Context, session string, reqs []shims.Request) (bool, string, string) {
			for _, r := range reqs {
				if r.Name == "evil" || r.Name == "fx-evil" {
					return true, "blocklist", r.Name + " is on the blocklist"
				}
			}
			return false, "", ""
		}})
	if err != nil {
		t.Fatal(err)
	}
	f.sock = filepath.Join(dir, "broker.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: f.sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(f.sock, 0o666)
	go b.Serve(ln)
	t.Cleanup(func() { b.Close() })
	return f
}

// client runs the client as nobody in session s1's cgroup; it returns
// stdout, stderr and the exit code.
func (f *fixture) client(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return f.clientIn(t, f.sess.SysProcAttr(t, 65534), args...)
}

// clientIn runs the client with attr.
func (f *fixture) clientIn(t *testing.T, attr *syscall.SysProcAttr, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(f.bin, args...)
	cmd.Env = []string{"SANDTRAIL_TEST_APT_CLIENT=" + f.sock, "LANG=C", "TERM=dumb"}
	cmd.SysProcAttr = attr
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running the client: %v", err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// TestInstall: as nobody, update and install hello from the fixture
// archive through the broker: apt's output reaches the client's stdout,
// its exit code comes back, dpkg installed into the scratch root, and the
// pkg.install event carries the hook's hash, the URL and the peer.
func TestInstall(t *testing.T) {
	f := start(t)
	if out, errOut, code := f.client(t, "update"); code != 0 {
		t.Fatalf("update through the broker: exit %d\n%s\n%s", code, out, errOut)
	}
	if f.prx.count() == 0 {
		t.Errorf("apt-get update did not go through the mirror's proxy")
	}
	out, errOut, code := f.client(t, "install", "-y", "--no-install-recommends", "hello")
	if code != 0 || !strings.Contains(out, "Unpacking hello (2.10-3)") || !strings.Contains(out, "Setting up hello (2.10-3)") {
		t.Fatalf("install hello through the broker: exit %d, want 0 and apt's output\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(f.root, "var/lib/dpkg/info/hello.list")); err != nil {
		t.Errorf("hello is not installed in the scratch root: %v", err)
	}
	sum := sha256.Sum256(f.arch.File(f.arch.Debs["hello"]))
	var got []*event.Pkg
	for _, e := range f.rec.take() {
		if e.Kind == event.KindPkgInstall {
			got = append(got, e.Pkg)
			if e.SessionID != "s1" || e.Proc == nil || *e.Proc.UID != 65534 || e.Source != event.SourceShim || e.V != event.SchemaVersion {
				t.Errorf("pkg.install event %+v, want session s1, uid 65534, source shim", e)
			}
		}
	}
	want := "sha256:" + hex.EncodeToString(sum[:])
	if len(got) != 1 || got[0].Name != "hello" || got[0].Resolved != "2.10-3" || got[0].Hash != want || got[0].Direct == nil || !*got[0].Direct ||
		got[0].SourceURL != f.arch.URL+f.arch.Debs["hello"] || got[0].Purl != "pkg:deb/debian/hello@2.10-3?arch=amd64" || got[0].ManagerPid == 0 {
		t.Errorf("pkg.install = %s, want hello 2.10-3 %s from %s", js(got), want, f.arch.URL+f.arch.Debs["hello"])
	}
	// apt's own failure: its exit code, not a refusal.
	if _, errOut, code := f.client(t, "install", "-y", "nosuchpkg"); code != 100 || strings.Contains(errOut, "REFUSED") {
		t.Errorf("install nosuchpkg: exit %d, %q, want apt's 100", code, errOut)
	}
}

// TestDescriptorsClosedOnce: the stdout and stderr a request passed are
// closed once, when the request is done, and never again: after a run of
// apt-get, files opened on the numbers the request's descriptors had stay
// open through garbage collection. On the code before, the broker wrapped
// the received descriptors in files whose finalizers closed those numbers
// again, later: the daemon's next request or a peer's pidfd lost its
// descriptor (fork/exec apt-get: bad file descriptor).
func TestDescriptorsClosedOnce(t *testing.T) {
	f := start(t)
	if out, errOut, code := f.client(t, "update"); code != 0 {
		t.Fatalf("update through the broker: exit %d\n%s\n%s", code, out, errOut)
	}
	time.Sleep(200 * time.Millisecond) // the broker closes them after its reply
	var files []*os.File
	for range 16 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		files = append(files, r, w)
	}
	for range 3 {
		runtime.GC()
		time.Sleep(50 * time.Millisecond)
	}
	for _, fl := range files {
		if _, err := fl.Stat(); err != nil {
			t.Errorf("%s (descriptor %d), opened after the request: %v, want it open", fl.Name(), fl.Fd(), err)
		}
	}
}

// TestRefused: what the broker must not run is refused with a message,
// and nothing reaches apt (the proxy sees no request).
func TestRefused(t *testing.T) {
	f := start(t)
	tests := []struct {
		name, want string
		args       []string
	}{
		{"option -o", "not allowed", []string{"install", "-o", "APT::Update::Pre-Invoke::=id", "hello"}},
		{"option -o=", "not allowed", []string{"install", "-oDPkg::Pre-Invoke::=id", "hello"}},
		{"config file", "not allowed", []string{"-c", "/tmp/x.conf", "install", "hello"}},
		{"unauthenticated", "not allowed", []string{"install", "--allow-unauthenticated", "hello"}},
		{"local deb", "local file", []string{"install", "./hello.deb"}},
		{"absolute deb", "local file", []string{"install", "/tmp/hello.deb"}},
		{"remove", "not allowed", []string{"remove", "hello"}},
		{"remove by install", "only installs", []string{"install", "hello-"}},
		{"metacharacters", "not a Debian package name", []string{"install", "hello;id"}},
		{"subshell", "not a Debian package name", []string{"install", "$(id)"}},
		{"release", "not a release", []string{"install", "-t", "x;id", "hello"}},
		{"blocked", "evil is on the blocklist", []string{"install", "evil"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.prx.count()
			out, errOut, code := f.client(t, tt.args...)
			if code != 100 || !strings.Contains(errOut, "REFUSED") || !strings.Contains(errOut, tt.want) || out != "" {
				t.Errorf("client(%q) = exit %d, stdout %q, stderr %q, want a refusal naming %q", tt.args, code, out, errOut, tt.want)
			}
			if f.prx.count() != before {
				t.Errorf("client(%q): apt ran (the mirror saw requests)", tt.args)
			}
			evs := f.rec.take()
			if tt.name == "blocked" {
				if len(evs) != 1 || evs[0].Kind != event.KindPkgBlocked || evs[0].Pkg.Rule != "blocklist" || evs[0].Pkg.Verdict != "block" {
					t.Errorf("blocked: events %s, want one pkg.blocked", js(evs))
				}
			} else if len(evs) != 0 {
				t.Errorf("client(%q): events %s, want none", tt.args, js(evs))
			}
		})
	}
}

// TestUnattributed: the broker runs nothing for a caller that the one
// attribution step (kernel/attribution) does not place in a session, and
// refuses it as the ingest server does: a process in no session's cgroup
// (as nobody, and as root), and a connection whose connecting process has
// exited and whose pid a process of another session took.
func TestUnattributed(t *testing.T) {
	f := start(t)
	for _, uid := range []uint32{65534, 0} {
		attr := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, errOut, code := f.clientIn(t, attr, "install", "-y", "hello")
		if code != 100 || !strings.Contains(errOut, "REFUSED: the caller is in no session") || out != "" {
			t.Errorf("uid %d outside every session: exit %d, stdout %q, stderr %q, want a refusal", uid, code, out, errOut)
		}
	}
	c, pid := attributiontest.Handoff(t, f.sock, f.sess.SysProcAttr(t, 65534))
	reused := attributiontest.ReusePid(t, pid, f.other.SysProcAttr(t, 65534))
	req, _ := json.Marshal(apt.BrokerRequest{Args: []string{"install", "-y", "hello"}})
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	fd := int(devnull.Fd())
	frame := append([]byte{byte(len(req) >> 24), byte(len(req) >> 16), byte(len(req) >> 8), byte(len(req))}, req...)
	if _, _, err := c.WriteMsgUnix(frame, syscall.UnixRights(fd, fd, fd), nil); err != nil {
		t.Fatal(err)
	}
	b, err := apt.ReadFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	var rep apt.BrokerReply
	if err := json.Unmarshal(b, &rep); err != nil || !rep.Refused || rep.Exit != 100 {
		t.Errorf("request on the connection of exited pid %d (recycled: %v) = %+v, %v, want refused", pid, reused, rep, err)
	}
	if f.prx.count() != 0 {
		t.Errorf("apt ran for an unattributed caller (the mirror saw requests)")
	}
	if evs := f.rec.take(); len(evs) != 0 {
		t.Errorf("events %s for unattributed callers, want none", js(evs))
	}
}

// TestPatternName: apt-get reads a name that matches no package as a
// regular expression, so `install fx-evi.` would install the blocklisted
// fx-evil; the broker checks what --print-uris says apt would fetch, and
// refuses with nothing installed.
func TestPatternName(t *testing.T) {
	f := start(t)
	if out, errOut, code := f.client(t, "update"); code != 0 {
		t.Fatalf("update through the broker: exit %d\n%s\n%s", code, out, errOut)
	}
	f.rec.take()
	for _, name := range []string{"fx-evi.", "fx-evil"} {
		out, errOut, code := f.client(t, "install", "-y", name)
		if code != 100 || !strings.Contains(errOut, "REFUSED") || !strings.Contains(errOut, "fx-evil is on the blocklist") {
			t.Errorf("install %s: exit %d, stdout %q, stderr %q, want a refusal", name, code, out, errOut)
		}
		if _, err := os.Stat(filepath.Join(f.root, "var/lib/dpkg/info/fx-evil.list")); err == nil {
			t.Fatalf("install %s: fx-evil is installed in the scratch root", name)
		}
		evs := f.rec.take()
		if len(evs) != 1 || evs[0].Kind != event.KindPkgBlocked || evs[0].Pkg.Name != "fx-evil" {
			t.Errorf("install %s: events %s, want one pkg.blocked of fx-evil", name, js(evs))
		}
	}
}

func js(v any) string {
	b, _ := jsonMarshal(v)
	return string(b)
}
