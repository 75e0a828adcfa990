package install_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
	"github.com/sandtrail/sandtrail/registry-mirror/crates/cratestest"
	"github.com/sandtrail/sandtrail/registry-mirror/pypi/pypitest"
)

// scratchSystem is how a test installs sandtrail onto this machine's own
// paths without changing this machine: a mount namespace of its own in
// which /etc, /usr, /var and /run are overlays of themselves, whose
// writes land in scratch directories. In it, this machine's own sandtrail
// (if any) is removed first, so that install.sh installs afresh; the Rust
// toolchain of root's rustup is mounted at /usr/local/rust with cargo and
// rustc linked in /usr/local/bin, as a Rust image puts a toolchain on the
// system PATH. dpkg's database is a copy taken under dpkg's own locks
// and bound over /var/lib/dpkg, since other tests' apt-get may change the
// host's while this one runs (an overlay's lower layer changing beneath
// it shows a half-done dpkg run: "dpkg was interrupted"). The namespace
// lives as long as its holder, a shell that waits on its standard input.
const scratchSystem = `set -e
s=$1 sysroot=$2
python3 - "$s/dpkg" <<'PY'
import fcntl, shutil, sys
locks = [open(p, "a") for p in ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock")]
for f in locks:
    fcntl.lockf(f, fcntl.LOCK_EX)
shutil.copytree("/var/lib/dpkg", sys.argv[1], symlinks=True)
PY
for d in etc usr var run; do
	mkdir -p "$s/overlay/$d/upper" "$s/overlay/$d/work"
	mount -t overlay "sandtrail-scratch-$d" -o "lowerdir=/$d,upperdir=$s/overlay/$d/upper,workdir=$s/overlay/$d/work" "/$d"
done
for d in etc usr var run; do
	grep -q "^sandtrail-scratch-$d /$d overlay " /proc/self/mounts || { echo "no overlay on /$d" >&2; exit 1; }
done
mount --bind "$s/dpkg" /var/lib/dpkg
rm -rf /usr/local/bin/sandtrail /usr/local/bin/sandtrail-shim /usr/local/lib/sandtrail \
	/etc/sandtrail /etc/profile.d/sandtrail-shims.sh /var/lib/sandtrail /run/sandtrail /usr/local/cargo
if [ -n "$sysroot" ]; then
	mkdir -p /usr/local/rust
	mount --bind "$sysroot" /usr/local/rust
	mount -o remount,bind,ro /usr/local/rust
	ln -sfn /usr/local/rust/bin/cargo /usr/local/bin/cargo
	ln -sfn /usr/local/rust/bin/rustc /usr/local/bin/rustc
fi
echo ready
read -r _ || true`

// system is a scratch system (scratchSystem) held by a running holder.
type system struct {
	t      *testing.T
	holder *exec.Cmd
	stdin  io.WriteCloser
	// env is root's environment for commands in the system: the standard
	// system PATH (with go's directory), as sudo's secure_path gives.
	env []string
}

// newSystem starts a scratch system beneath scratch, with the Rust
// toolchain at sysroot (none when empty).
func newSystem(t *testing.T, scratch, sysroot string) *system {
	t.Helper()
	h := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", scratchSystem, "sh", scratch, sysroot)
	stdin, err := h.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := h.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	h.Stderr = &stderr
	if err := h.Start(); err != nil {
		t.Fatalf("starting the scratch system: %v", err)
	}
	s := &system{t: t, holder: h, stdin: stdin}
	t.Cleanup(s.stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("the scratch system did not start: %q, %v\n%s", line, err, stderr.String())
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	s.env = []string{"PATH=" + filepath.Dir(goBin) + ":" + launch.SystemPath, "HOME=/root", "LANG=C.UTF-8"}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOTOOLCHAIN"} {
		if v, ok := os.LookupEnv(k); ok {
			s.env = append(s.env, k+"="+v)
		}
	}
	return s
}

// stop ends the holder: the namespace goes when its last process does.
func (s *system) stop() {
	s.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- s.holder.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.holder.Process.Kill()
		<-done
	}
}

// cmd is argv run as root in the system.
func (s *system) cmd(argv ...string) *exec.Cmd {
	c := exec.Command("nsenter", append([]string{fmt.Sprintf("--mount=/proc/%d/ns/mnt", s.holder.Process.Pid), "--"}, argv...)...)
	c.Env = s.env
	return c
}

// output runs argv in the system and returns its stdout, failing the test
// when it fails.
func (s *system) output(argv ...string) []byte {
	s.t.Helper()
	c := s.cmd(argv...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		s.t.Fatalf("%s: %v\n%s%s", strings.Join(argv, " "), err, out, stderr.String())
	}
	return out
}

// freePort is a TCP port on loopback that nothing listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// needInstalled skips unless this machine can host sessions and has what
// the installs use: the managers the agent finds on the system PATH, apt,
// and the tools that make the scratch system.
func needInstalled(t *testing.T) {
	t.Helper()
	needRoot(t)
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skip("needs BTF (/sys/kernel/btf/vmlinux) for the eBPF collector")
	}
	for _, p := range []string{"/usr/bin/npm", "/usr/bin/node", "/usr/bin/pip", "/usr/bin/python3", "/usr/bin/apt-get", "/usr/bin/nsenter"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("the installs need %s on the system PATH (scripts/deps.sh installs it): %v", p, err)
		}
	}
	if b, _ := os.ReadFile("/proc/filesystems"); !bytes.Contains(b, []byte("\toverlay\n")) {
		t.Skip("the scratch system needs overlayfs")
	}
}

// rustSysroot is the stable toolchain's directory (rustc --print sysroot of
// the rustc on PATH or in ~/.cargo/bin), or "" when there is none.
func rustSysroot(t *testing.T) string {
	rustc, err := exec.LookPath("rustc")
	if err != nil {
		home, _ := os.UserHomeDir()
		rustc = filepath.Join(home, ".cargo", "bin", "rustc")
	}
	c := exec.Command(rustc, "--print", "sysroot")
	c.Env = append(os.Environ(), "RUSTUP_TOOLCHAIN=stable")
	out, err := c.Output()
	if err != nil {
		t.Logf("no Rust toolchain (%s --print sysroot: %v): no cargo builds", rustc, err)
		return ""
	}
	sysroot := strings.TrimSpace(string(out))
	for _, b := range []string{"cargo", "rustc"} {
		if _, err := os.Stat(filepath.Join(sysroot, "bin", b)); err != nil {
			t.Logf("the toolchain at %s has no %s: no cargo builds", sysroot, b)
			return ""
		}
	}
	return sysroot
}

// session is one agent session of clean installs: a shell script, and how
// many installs it runs.
type session struct {
	name     string
	installs int
	script   string
	env      []string
}

// installScript is a session script that runs each install in cmds, in
// order, stopping at the first that fails and printing its output. Each
// command runs in the session's home, after setup; "cd DIR && ..." moves.
func installScript(setup string, cmds []string) session {
	var b strings.Builder
	b.WriteString("set -e\ncd \"$HOME\"\n" + setup + "\n")
	b.WriteString("step() { echo \"+ $1\" >>\"$HOME/steps.log\"; sh -c \"$1\" >\"$HOME/step.out\" 2>&1 || { code=$?; echo \"FAILED ($code): $1\"; cat \"$HOME/step.out\"; exit 3; }; }\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "step %s\n", shellQuote(c))
	}
	return session{installs: len(cmds), script: b.String()}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// npmFlags are the flags of the agent's npm installs: no audit, fund or
// update check, which would reach the registry outside an install.
const npmFlags = "--no-audit --no-fund --no-update-notifier"

// npmProject makes a fresh npm project DIR in the home and runs npm there.
func npmProject(dir, args string) string {
	return fmt.Sprintf(`mkdir -p "$HOME/%[1]s" && cd "$HOME/%[1]s" && { [ -e package.json ] || echo '{"name":"%[1]s","version":"1.0.0"}' >package.json; } && npm %[2]s %[3]s`, dir, args, npmFlags)
}

// crateProject makes a cargo project DIR in the home depending on deps
// (Cargo.toml lines) and builds it.
func crateProject(dir string, deps ...string) string {
	return fmt.Sprintf(`mkdir -p "$HOME/%[1]s/src" && cd "$HOME/%[1]s" && printf '[package]\nname = "%[1]s"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n%[2]s\n' >Cargo.toml && echo 'pub fn f() {}' >src/lib.rs && cargo build`,
		dir, strings.Join(deps, `\n`))
}

// pipTarget is a pip install into its own target directory (the system
// Python is externally managed).
func pipTarget(dir, args string) string {
	return fmt.Sprintf(`pip install --disable-pip-version-check --no-input --retries 0 --target "$HOME/%s" %s`, dir, args)
}

// aptPackages are the Debian packages the agent installs: small, with
// few dependencies, and none of them another test's (TestShimAptInstall's
// hello, TestShimAptJoins' figlet and cowsay).
var aptPackages = []string{"sl", "pv", "tree", "rig"}

// TestInstalledCleanInstalls is sandtrail as a user installs and runs it:
// install.sh (no --root) installs onto this machine's own paths (in a
// scratch system: scratchSystem), with --mirror naming the daemon's
// mirror; the daemon runs from its installed config with the fixture
// upstreams and a policy that approves them; and `sandtrail run`, as a
// user types it, runs sessions as the default agent user, whose PATH
// finds install.sh's symlinked shims first and then the system's managers.
// The sessions make 50 clean installs: npm packages from the real
// registry through the mirror (npm ci from a lockfile, a package whose
// postinstall runs, one of them), pip installs and cargo builds (with
// CARGO_HOME the one install.sh configured, as a Rust image sets it)
// against fixture indexes, and apt-get installs of small Debian packages
// through the broker. Not one alert may be raised, in the record or by
// the package view, and every package row is shim+mirror and verified.
func TestInstalledCleanInstalls(t *testing.T) {
	needInstalled(t)
	scratch, err := os.MkdirTemp("", "sandtrail-installed-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(scratch) })
	sysroot := rustSysroot(t)

	old := time.Now().Add(-30 * 24 * time.Hour)
	pypi := pypitest.Start(t,
		pypitest.Project{Name: "fixture-alpha", Versions: []pypitest.Version{{Version: "1.0", Uploaded: old}, {Version: "1.1", Uploaded: old}}},
		pypitest.Project{Name: "fixture-beta", Versions: []pypitest.Version{{Version: "2.0", Uploaded: old, Deps: []string{"fixture-gamma>=0.1"}}}},
		pypitest.Project{Name: "fixture-gamma", Versions: []pypitest.Version{{Version: "0.1", Uploaded: old}, {Version: "0.2", Uploaded: old}}},
		pypitest.Project{Name: "fixture-delta", Versions: []pypitest.Version{{Version: "3.0", Uploaded: old, Sdist: true}}},
		pypitest.Project{Name: "fixture-epsilon", Versions: []pypitest.Version{{Version: "0.5", Uploaded: old}}})
	leaf := []cratestest.Dep{{Name: "fx-leaf", Req: "^1"}}
	crates := cratestest.Start(t,
		cratestest.Crate{Name: "fx-leaf", Versions: []cratestest.Version{{Version: "1.0.0"}, {Version: "1.0.1"}}},
		cratestest.Crate{Name: "fx-mid", Versions: []cratestest.Version{{Version: "0.2.0", Deps: leaf}}},
		cratestest.Crate{Name: "fx-other", Versions: []cratestest.Version{{Version: "0.1.0"}}},
		cratestest.Crate{Name: "fx-top", Versions: []cratestest.Version{{Version: "2.0.0", Deps: []cratestest.Dep{{Name: "fx-mid", Req: "0.2"}, {Name: "fx-other", Req: "0.1"}}}}},
		cratestest.Crate{Name: "fx-script", Versions: []cratestest.Version{{Version: "0.1.0", Files: map[string]string{"build.rs": harmlessBuildScript}}}})

	sys := newSystem(t, scratch, sysroot)
	mirror := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	script, err := filepath.Abs("../../install.sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("install.sh --mirror %s:\n%s", mirror, sys.output(script, "--mirror", mirror))
	for _, p := range []string{"/usr/local/bin/sandtrail", "/usr/local/bin/sandtrail-shim", launch.ShimDir + "/npm", "/usr/local/cargo/config.toml", "/etc/pip.conf"} {
		sys.output("test", "-e", p)
	}
	if target := strings.TrimSpace(string(sys.output("readlink", launch.ShimDir+"/npm"))); target != shimTarget {
		t.Fatalf("%s/npm links to %q, want %s", launch.ShimDir, target, shimTarget)
	}

	// The operator's part: the policy approves the fixture indexes, and the
	// daemon's mirror serves where install.sh pointed the managers, with
	// the fixtures as the PyPI and crates.io upstreams.
	pol := string(sys.output("sandtrail", "policy", "show"))
	pol = addRegistries(t, pol, "pypi", pypi.SimpleURL(), pypi.Files.URL+"/packages/")
	pol = addRegistries(t, pol, "cargo", crates.URL+"/")
	writeIn(t, sys, "/etc/sandtrail/policy.yaml", pol)
	installedCfg := string(sys.output("cat", "/etc/sandtrail/config.yaml"))
	cfg := installedCfg + fmt.Sprintf("policy: /etc/sandtrail/policy.yaml\nmirror:\n  listen: %s\n  upstreams:\n    pypi: %s\n    cargo: %s/\n",
		strings.TrimPrefix(mirror, "http://"), pypi.SimpleURL(), crates.URL)
	writeIn(t, sys, "/etc/sandtrail/config.yaml", cfg)
	// As the official Rust images make their CARGO_HOME: writable by every
	// user, for cargo's registry cache.
	sys.output("chmod", "a+w", "/usr/local/cargo")

	daemon := startDaemon(t, sys)

	sessions := cleanSessions(sysroot != "")
	total := 0
	for _, s := range sessions {
		total += s.installs
	}
	if sysroot != "" && total != 50 {
		t.Fatalf("the sessions make %d installs, want 50", total)
	}
	results := make([]runResult, len(sessions))
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runSession(sys, s)
		}()
	}
	wg.Wait()

	rows := 0
	for i, s := range sessions {
		r := results[i]
		if r.err != nil || r.code != 0 {
			t.Errorf("session %s: exit %d, %v\nstdout:\n%s\nstderr:\n%s", s.name, r.code, r.err, r.stdout, r.stderr)
			continue
		}
		id := r.summary.SessionID
		for _, a := range queryAlerts(t, sys, id) {
			t.Errorf("session %s (%s): alert in the record on clean work:\n%s", s.name, id, a)
		}
		v := packagesView(t, sys, id)
		for _, a := range v.Alerts {
			j, _ := json.MarshalIndent(a, "", "  ")
			t.Errorf("session %s (%s): the package view raises an alert on clean work:\n%s", s.name, id, j)
		}
		if len(v.Packages) == 0 {
			t.Errorf("session %s: no package rows for %d installs", s.name, s.installs)
		}
		for _, p := range v.Packages {
			rows++
			if p.Seen != pkgview.SeenBoth || p.Verified == nil || !*p.Verified || len(p.Alerts) > 0 {
				j, _ := json.MarshalIndent(p, "", "  ")
				t.Errorf("session %s: a row not shim+mirror and verified:\n%s", s.name, j)
			}
		}
		if t.Failed() {
			t.Logf("session %s (%s): its pkg events, in journal order:\n%s", s.name, id, pkgEvents(t, sys, id))
		}
		t.Logf("session %s (%s): %d installs, %d package rows", s.name, id, s.installs, len(v.Packages))
	}
	// Nothing anywhere in the record, the daemon's own events included.
	for _, a := range queryAlerts(t, sys, "") {
		t.Errorf("alert in the record:\n%s", a)
	}
	t.Logf("%d installs in %d sessions, %d package rows", total, len(sessions), rows)
	daemon.stop(t) // its journal signs a final checkpoint
	if out, err := sys.cmd("sandtrail", "verify").CombinedOutput(); err != nil {
		t.Errorf("sandtrail verify: %v\n%s", err, out)
	}

	// `make demo`'s last step, scripts/demo.sh, on the installed layout
	// and the configuration install.sh wrote: `sandtrail run` hosts the
	// session itself, with the installed shims.
	writeIn(t, sys, "/etc/sandtrail/config.yaml", installedCfg)
	demo, err := filepath.Abs("../../scripts/demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	// The demo writes its HTML report to its working directory.
	c := sys.cmd(demo)
	c.Dir = t.TempDir()
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/demo.sh on the installed layout: %v\n%s", err, out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^npm +left-pad +\^1\.3\.0 +1\.3\.0 +shim\+mirror +yes +sha512-`),
		regexp.MustCompile(`(?m)^pypi +sandtrail-demo +\S+ +1\.0 +shim\+mirror +yes +sha256:`),
		regexp.MustCompile(`(?m)^  alerts +2$`),
		regexp.MustCompile(`(?m)^status +intact$`),
	} {
		if !want.Match(out) {
			t.Errorf("scripts/demo.sh on the installed layout: no line matching %s\n%s", want, out)
		}
	}
	// The clean installs raised no alert; the demo's agent earned two (its
	// curl | sh and its credentials write), and nothing else.
	demoID := regexp.MustCompile(`(?m)^sandtrail: session (demo-\S+) ended`).FindSubmatch(out)
	if demoID == nil {
		t.Fatalf("scripts/demo.sh: no session ended line\n%s", out)
	}
	var demoAlerts []string
	for _, a := range queryAlerts(t, sys, "") {
		if !strings.Contains(a, `"session_id":"`+string(demoID[1])+`"`) {
			t.Errorf("alert in the record of clean work:\n%s", a)
			continue
		}
		var e event.Event
		if err := json.Unmarshal([]byte(a), &e); err != nil || e.Alert == nil {
			t.Fatalf("an alert: %v\n%s", err, a)
		}
		demoAlerts = append(demoAlerts, e.Alert.Title)
	}
	slices.Sort(demoAlerts)
	if want := []string{"Download piped to a shell or interpreter", "Write to a credential path"}; !slices.Equal(demoAlerts, want) {
		t.Errorf("the demo's alerts are %q, want only %q", demoAlerts, want)
	}
}

// harmlessBuildScript is fx-script's build.rs: it writes into OUT_DIR,
// as build scripts do, and nothing else.
const harmlessBuildScript = `fn main() {
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    std::fs::write(format!("{}/generated.rs", out), "pub const X: u32 = 1;").expect("writing OUT_DIR");
    println!("cargo:rerun-if-changed=build.rs");
}
`

// cleanSessions are the sessions of TestInstalledCleanInstalls: 50
// installs, with cargo builds when there is a toolchain.
func cleanSessions(cargo bool) []session {
	npmA := installScript("", []string{
		npmProject("a", "install is-odd"),
		npmProject("a", "install left-pad"),
		npmProject("a", "install ms"),
		npmProject("a", "install debug"),
		npmProject("a", "install chalk@4"),
		npmProject("a", "install lodash.get"),
		npmProject("a", "install is-number@7"),
		npmProject("a", "install kind-of@6"),
		npmProject("a", "install once"),
		npmProject("a", "install semver@7"),
		npmProject("a", "install --save-dev inherits"),
		npmProject("a", "install"), // the project's own dependencies, again
	})
	npmA.name = "npm-a"
	npmB := installScript("", []string{
		npmProject("b1", "install uuid@9"),
		npmProject("b2", "install minimist"),
		npmProject("b3", "install picocolors"),
		npmProject("b4", "install escape-string-regexp@4"),
		npmProject("b5", "install commander@9"),
		npmProject("b6", "install lru-cache@6"),
		npmProject("b7", "install balanced-match safe-buffer"),
		npmProject("b8", "install core-js@3"), // its postinstall prints a banner
		npmProject("b9", "install --save-exact nanoid@3.3.7"),
		npmProject("b10", "install has-flag@4 supports-color@7"),
		npmProject("b11", "install isarray"),
		npmProject("b12", "install path-is-absolute"),
	})
	npmB.name = "npm-b"
	npmCI := installScript("", []string{
		npmProject("ci", "install --package-lock-only ms@2.1.3 debug@4 chalk@4 is-odd@3"),
		npmProject("ci", "ci"),
		`cd "$HOME/ci" && rm -rf node_modules && npm ci ` + npmFlags,
		npmProject("ci", "install yallist@4"),
	})
	npmCI.name = "npm-ci"
	pip := installScript("", []string{
		pipTarget("p1", "fixture-alpha"),
		pipTarget("p2", "'fixture-alpha==1.0'"),
		pipTarget("p3", "fixture-beta"),
		pipTarget("p4", "'fixture-gamma<0.2'"),
		pipTarget("p5", "fixture-delta"),
		pipTarget("p6", "fixture-epsilon fixture-gamma"),
		`printf 'fixture-alpha>=1.0\nfixture-beta==2.0\n' >"$HOME/requirements.txt" && ` + pipTarget("p7", `-r "$HOME/requirements.txt"`),
		pipTarget("p1", "--upgrade 'fixture-alpha==1.0'"),
		pipTarget("p8", "--no-deps fixture-beta"),
		pipTarget("p9", "'fixture-delta==3.0'"),
		pipTarget("p10", "'fixture-gamma==0.2'"),
		pipTarget("p11", "'fixture-beta>=2'"),
	})
	pip.name = "pip"
	apt := installScript("apt-get update -qq", func() []string {
		var out []string
		for _, p := range aptPackages {
			out = append(out, "apt-get install -y "+p)
		}
		return out
	}())
	apt.name = "apt"
	out := []session{npmA, npmB, npmCI, pip, apt}
	if cargo {
		c := installScript("", []string{
			crateProject("c1", `fx-leaf = "1"`),
			crateProject("c2", `fx-mid = "0.2"`),
			crateProject("c3", `fx-top = "2"`),
			crateProject("c4", `fx-script = "0.1"`),
			`cd "$HOME/c1" && cargo update && cargo build`,
			`mkdir -p "$HOME/c5/src" && cd "$HOME/c5" && printf '[package]\nname = "c5"\nversion = "0.1.0"\nedition = "2021"\n' >Cargo.toml && echo 'fn main() {}' >src/main.rs && cargo add fx-other@0.1 && cargo build`,
		})
		c.name = "cargo"
		// CARGO_HOME as the Rust images set it: the config install.sh wrote.
		c.env = []string{"CARGO_HOME=/usr/local/cargo", "CARGO_TERM_COLOR=never"}
		out = append(out, c)
	}
	return out
}

// addRegistries adds urls to the ecosystem's list of approved registries
// in a policy as `sandtrail policy show` prints it.
func addRegistries(t *testing.T, pol, eco string, urls ...string) string {
	t.Helper()
	key := "\n    " + eco + ":\n"
	i := strings.Index(pol, key)
	if i < 0 {
		t.Fatalf("the policy has no sources.registries.%s list:\n%s", eco, pol)
	}
	var add strings.Builder
	for _, u := range urls {
		fmt.Fprintf(&add, "      - %s\n", u)
	}
	at := i + len(key)
	return pol[:at] + add.String() + pol[at:]
}

// writeIn writes content to path in the system, as root, 0644.
func writeIn(t *testing.T, sys *system, path, content string) {
	t.Helper()
	c := sys.cmd("sh", "-c", `cat >"$1" && chmod 0644 "$1"`, "sh", path)
	c.Stdin = strings.NewReader(content)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("writing %s: %v\n%s", path, err, out)
	}
}

// daemon is a running `sandtrail daemon` of the system.
type daemon struct {
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan error
}

// startDaemon starts the installed daemon on its installed configuration
// and waits until sessions can be handed to it.
func startDaemon(t *testing.T, sys *system) *daemon {
	t.Helper()
	d := &daemon{cmd: sys.cmd("sandtrail", "daemon"), log: &bytes.Buffer{}, done: make(chan error, 1)}
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting sandtrail daemon: %v", err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() { d.stop(t) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if sys.cmd("test", "-S", "/run/sandtrail/control.sock").Run() == nil {
			return d
		}
		select {
		case err := <-d.done:
			d.done <- err
			t.Fatalf("sandtrail daemon exited: %v\n%s", err, d.log)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandtrail daemon: no control socket after 60 s\n%s", d.log)
		}
	}
}

// stop stops the daemon with SIGTERM (once) and logs what it said.
func (d *daemon) stop(t *testing.T) {
	if d.cmd.ProcessState != nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		if err != nil {
			t.Errorf("sandtrail daemon: %v", err)
		}
	case <-time.After(60 * time.Second):
		_ = d.cmd.Process.Kill()
		t.Errorf("sandtrail daemon did not stop on SIGTERM within 60 s")
	}
	t.Logf("sandtrail daemon's log:\n%s", d.log)
}

// runResult is how one `sandtrail run` ended.
type runResult struct {
	code           int
	stdout, stderr string
	summary        struct {
		SessionID string `json:"session_id"`
		HostedBy  string `json:"hosted_by"`
	}
	err error
}

// runSession runs s as a user does: `sandtrail run -- sh -c SCRIPT`, as
// the default agent user, handed to the daemon.
func runSession(sys *system, s session) runResult {
	args := []string{"sandtrail", "run", "--format", "json", "--timeout", "6m"}
	for _, e := range s.env {
		args = append(args, "--env", e)
	}
	c := sys.cmd(append(args, "--", "sh", "-c", s.script)...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	r := runResult{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		r.err = err
		return r
	}
	i := strings.LastIndex(r.stderr, "{\n  \"session_id\"")
	if i < 0 {
		r.err = fmt.Errorf("no summary on stderr")
		return r
	}
	if err := json.Unmarshal([]byte(r.stderr[i:]), &r.summary); err != nil {
		r.err = fmt.Errorf("decoding the summary: %v", err)
	} else if r.summary.HostedBy != "daemon" {
		r.err = fmt.Errorf("hosted by %q, want the daemon", r.summary.HostedBy)
	}
	return r
}

// queryAlerts are the alert events of session id (every session's when
// empty), each as its JSON line.
func queryAlerts(t *testing.T, sys *system, id string) []string {
	t.Helper()
	args := []string{"sandtrail", "query", "--kind", event.KindAlert, "--format", "jsonl"}
	if id != "" {
		args = append(args, "--session", id)
	}
	var out []string
	for _, l := range strings.Split(string(sys.output(args...)), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// packagesView is `sandtrail packages --session id --format json`.
func packagesView(t *testing.T, sys *system, id string) *pkgview.View {
	t.Helper()
	out := sys.output("sandtrail", "packages", "--session", id, "--format", "json")
	var v pkgview.View
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("sandtrail packages --format json: %v\n%s", err, out)
	}
	return &v
}

// pkgEvents is one line per pkg event of session id, in journal order,
// for a failure message.
func pkgEvents(t *testing.T, sys *system, id string) string {
	t.Helper()
	var b strings.Builder
	out := sys.output("sandtrail", "query", "--session", id, "--kind", "pkg", "--format", "jsonl")
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		e, err := event.Unmarshal([]byte(l))
		if err != nil || e.Pkg == nil {
			continue
		}
		pid := int32(0)
		if e.Proc != nil {
			pid = e.Proc.Pid
		}
		fmt.Fprintf(&b, "%d %s %s %s %s@%s hash %.24s verified %v outcome %s pid %d\n", e.Seq, e.TS.Format(time.RFC3339Nano), e.Kind, e.Source,
			e.Pkg.Name, e.Pkg.Resolved, e.Pkg.Hash, e.Pkg.Verified != nil && *e.Pkg.Verified, e.Pkg.Outcome, pid)
	}
	return b.String()
}
