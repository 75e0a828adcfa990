package demo_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
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
// one refused, the metadata probe refused by the egress policy, the tool
// call, the subprocess killed by the memory limit, exactly the two alerts
// the agent earned (curl | sh, the credentials write) and no other, an
// intact journal, the HTML report written, and no warning or error logged
// on the way. demo.sh itself fails when the record lacks any kind of event
// the agent made.
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
	script, err := filepath.Abs(demoScript)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, script)
	cmd.Env, cmd.Dir = env, dir
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
		regexp.MustCompile(`(?m)^agent: +recorded: \{"seq": \d+, `),
		regexp.MustCompile(`(?m)^agent: +killed by the kernel's OOM killer \(exit 137\)$`),
		regexp.MustCompile(`(?m) limit\.hit +memory_oom: `),
		// Whichever end of the pipe the rule saw exec second names the other.
		regexp.MustCompile(`(?m) high +download_piped_to_shell +pid=\d+ (sh stdin<-curl|curl .* stdout->sh)\[\d+\]$`),
		regexp.MustCompile(`(?m) high +credential_write +create \S+/\.aws/credentials `),
		regexp.MustCompile(`(?m)^\S+ ├─ \d+ npm install `),
		regexp.MustCompile(`(?m)^  /etc/shadow +read \(EACCES\)  \[sensitive\]$`),
		regexp.MustCompile(`(?m)^status +intact$`),
		regexp.MustCompile(`(?m)^sandtrail: session demo-\S+ normal exit=0 .*; alerts 2 high; journal intact$`),
		regexp.MustCompile(`(?m)^recorded: .*\btool=1\b`),
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

	alerts := exec.Command(bin, "alerts", "--format", "jsonl")
	alerts.Env = env
	a, err := alerts.Output()
	if err != nil {
		t.Fatalf("sandtrail alerts: %v", err)
	}
	var titles []string
	for _, line := range strings.Split(strings.TrimSpace(string(a)), "\n") {
		var e struct {
			Alert struct{ Title string } `json:"alert"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("sandtrail alerts: %v: %s", err, line)
		}
		titles = append(titles, e.Alert.Title)
	}
	slices.Sort(titles)
	if want := []string{"Download piped to a shell or interpreter", "Write to a credential path"}; !slices.Equal(titles, want) {
		t.Errorf("the demo's alerts are %q, want only %q", titles, want)
	}
	reports, _ := filepath.Glob(filepath.Join(dir, "sandtrail-report-demo-*.html"))
	if len(reports) != 1 {
		t.Fatalf("the demo wrote %d HTML reports in its directory, want 1", len(reports))
	}
	if page, err := os.ReadFile(reports[0]); err != nil || !strings.Contains(string(page), `<tr class="alert"`) {
		t.Errorf("the HTML report: %v", err)
	}
}
