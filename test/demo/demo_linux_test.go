package demo_test

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/test/shimtest"
)

// demoScript is scripts/demo.sh, from this package's directory.
var demoScript = filepath.Join("..", "..", "scripts", "demo.sh")

func needDemo(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the demo runs as root: sessions need their own cgroups and the collector loads BPF programs")
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skip("the demo needs BTF (/sys/kernel/btf/vmlinux) for the eBPF collector")
	}
	if _, err := user.Lookup(launch.AgentUser); err != nil {
		t.Skipf("the demo's session runs as %s, which does not exist (install.sh and make test create it): %v", launch.AgentUser, err)
	}
	// The agent's own PATH (after the shims) is the system's, not root's.
	for _, p := range []string{"/usr/bin/python3", "/usr/bin/pip", "/usr/bin/npm", "/usr/bin/node"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("the demo's agent needs %s (scripts/deps.sh demo installs it): %v", p, err)
		}
	}
	for _, c := range []string{"python3", "ip"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("scripts/demo.sh needs %s: %v", c, err)
		}
	}
}

// build builds sandtrail into dir and sandtrail-shim linked as every
// manager into dir/shims, as install.sh installs them.
func build(t *testing.T, dir string) (bin, shims string) {
	t.Helper()
	bin = filepath.Join(dir, "sandtrail")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sandtrail/sandtrail/cmd/sandtrail").CombinedOutput(); err != nil {
		t.Fatalf("building sandtrail: %v\n%s", err, out)
	}
	shim := filepath.Join(dir, "sandtrail-shim")
	if err := shimtest.Build(shim); err != nil {
		t.Fatal(err)
	}
	shims = filepath.Join(dir, "shims")
	if err := shimtest.Link(shim, shims); err != nil {
		t.Fatal(err)
	}
	return bin, shims
}

// TestDemo runs scripts/demo.sh and checks its output: both packages
// installed through the shims and verified by the mirror, the blocklisted
// one refused, no alert, the metadata probe refused by the egress policy
// and recorded as a blocked connect, an intact journal, and no warning or
// error logged on the way. demo.sh itself fails when the probe's blocked
// connect is missing from the record.
func TestDemo(t *testing.T) {
	needDemo(t)
	// Not t.TempDir, whose parent is 0700: the agent reaches the shims
	// and its workdir beneath dir.
	dir, err := os.MkdirTemp("", "sandtrail-demo-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	bin, shims := build(t, dir)
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o711); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"SANDTRAIL="+bin,
		"SANDTRAIL_DATA_DIR="+data,
		"SANDTRAIL_SOCKET="+filepath.Join(data, "run", "ingest.sock"),
		"SANDTRAIL_SHIM_DIR="+shims,
	)
	keys := exec.Command(bin, "keys", "generate")
	keys.Env = env
	if out, err := keys.CombinedOutput(); err != nil {
		t.Fatalf("sandtrail keys generate: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, demoScript)
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("scripts/demo.sh: %v\n%s", err, out)
	}

	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^npm +left-pad +\^1\.3\.0 +1\.3\.0 +shim\+mirror +yes +sha512-`),
		regexp.MustCompile(`(?m)^pypi +sandtrail-demo +\S+ +1\.0 +shim\+mirror +yes +sha256:`),
		regexp.MustCompile(`(?m)^npm +event-stream +3\.3\.6 +- +blocked `),
		regexp.MustCompile(`(?m)^agent: +EPERM \(Operation not permitted\): refused by the session's egress policy$`),
		regexp.MustCompile(`(?m) pkg\.blocked +npm event-stream@3\.3\.6 `),
		regexp.MustCompile(`(?m) net\.connect +connect tcp \S+:80 \[blocked\] `),
		regexp.MustCompile(`(?m)^  alerts +none$`),
		regexp.MustCompile(`(?m)^status +intact$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the demo's output has no line matching %s\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if l := strings.ToLower(line); strings.Contains(l, "[warn]") || strings.Contains(l, "[error]") || strings.Contains(l, "warning") {
			t.Errorf("the demo logged %q on clean work", line)
		}
	}

	alerts := exec.Command(bin, "query", "--kind", "alert", "--format", "jsonl")
	alerts.Env = env
	a, err := alerts.Output()
	if err != nil {
		t.Fatalf("sandtrail query --kind alert: %v", err)
	}
	if s := strings.TrimSpace(string(a)); s != "" {
		t.Errorf("the demo raised alerts:\n%s", s)
	}
}
