package deps

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sandtrail/sandtrail"

// guarded are the parts of the tree whose imports are restricted: the
// layers (kernel/ and resolver/ are leaves; record/ and policies/ sit on
// them; the producers (collector, dnsproxy, mcpproxy, registry-mirror, shims) on
// those; daemon/ on the producers; cmd/ on top), and the lean binaries
// and packages within them. pkg is an import path relative to the module,
// or a pattern ending in "/..." for a package and everything beneath it.
// A deny key is an import path or such a pattern; its value says why it
// is denied.
var guarded = []struct {
	pkg string
	// stdOnly allows only the standard library, the packages that pkg
	// names, and the patterns in allow.
	stdOnly bool
	allow   []string
	deny    map[string]string
}{
	{
		pkg:     "kernel/...",
		stdOnly: true,
		allow:   []string{"golang.org/x/sys/..."},
	},
	{
		pkg:  "resolver/...",
		deny: above("the resolver is a leaf: it knows ecosystems, versions and purls", "record", "policies", "kernel", "collector", "dnsproxy", "mcpproxy", "registry-mirror", "shims", "daemon", "cmd"),
	},
	{
		pkg:     "record/event",
		stdOnly: true,
	},
	{
		// Producers and leaves (registry-mirror/verify) import it for
		// Clip, so it stays as lean as the event it renders.
		pkg:     "record/render",
		stdOnly: true,
		allow:   []string{module + "/record/event"},
	},
	{
		pkg:  "record/...",
		deny: above("the record imports no producer: producers convert to event.Event and the daemon feeds the record", "collector", "dnsproxy", "mcpproxy", "registry-mirror", "shims", "daemon", "cmd"),
	},
	{
		pkg:  "policies/...",
		deny: above("the policy is below the producers that ask it", "collector", "dnsproxy", "mcpproxy", "registry-mirror", "shims", "daemon", "cmd"),
	},
	{
		pkg: "collector/...",
		deny: merge(above("producers are side by side: the daemon wires them", "dnsproxy", "mcpproxy", "registry-mirror", "shims", "daemon", "cmd"), map[string]string{
			module + "/policies":         "the policy engine: the collector takes its egress table through EgressPolicy and policies/egress",
			"github.com/spf13/viper/...": "configuration belongs to the binaries",
			"go.yaml.in/yaml/...":        "YAML is the policy loader's",
			"modernc.org/sqlite/...":     "SQLite is the index's",
			"pault.ag/go/debian/...":     "the Debian parser is the resolver's",
			module + "/record/index/...": "the index (SQLite) is a consumer",
			module + "/resolver/...":     "version parsing is the policy engine's and the mirror's",
			"github.com/spf13/cobra/...": "commands are cmd/sandtrail's",
		}),
	},
	{
		pkg:  "dnsproxy/...",
		deny: above("producers are side by side: the daemon wires them", "collector", "mcpproxy", "registry-mirror", "shims", "daemon", "cmd"),
	},
	{
		// The proxy runs as the agent, in the stream between it and an MCP
		// server: its Calls go to the daemon through whatever Recorder the
		// binary gives it.
		pkg:     "mcpproxy/...",
		stdOnly: true,
		allow:   []string{module + "/record/event"},
	},
	{
		pkg:  "registry-mirror/...",
		deny: above("producers are side by side: the daemon wires them", "collector", "dnsproxy", "mcpproxy", "shims", "daemon", "cmd"),
	},
	{
		pkg:  "shims/...",
		deny: above("producers are side by side: the daemon wires them", "collector", "dnsproxy", "mcpproxy", "registry-mirror", "daemon", "cmd"),
	},
	{
		pkg:  "daemon/...",
		deny: above("the daemon is the composition root, below the binaries", "cmd"),
	},
	{
		pkg: "cmd/sandtrail-shim",
		deny: map[string]string{
			"github.com/cilium/ebpf/...":        "BPF is the daemon's: the shim runs as the agent",
			"modernc.org/sqlite/...":            "SQLite is the daemon's index",
			module + "/registry-mirror/...":     "the mirror runs in the daemon; the shim only points the package manager at it",
			module + "/collector/...":           "the eBPF collector and the sessions run in the daemon",
			module + "/policies/...":            "the policy is the daemon's: the shim asks it over the ingest socket",
			module + "/daemon/...":              "the daemon is root's",
			module + "/record/journal/...":      "the journal is the daemon's",
			module + "/shims/apt/broker/...":    "the apt broker runs as root in the daemon",
			"github.com/spf13/...":              "the shim has no flags or config files of its own",
			"go.yaml.in/yaml/...":               "the shim parses no policy",
			"github.com/hashicorp/go-hclog/...": "the shim's messages are a few lines on stderr",
		},
	},
}

// above returns a deny list of the module's trees named by dirs, each
// denied for why.
func above(why string, dirs ...string) map[string]string {
	deny := map[string]string{}
	for _, d := range dirs {
		deny[module+"/"+d+"/..."] = why
	}
	return deny
}

// merge returns the union of the deny lists, the later ones winning.
func merge(lists ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, l := range lists {
		maps.Copy(out, l)
	}
	return out
}

// platforms are the GOOS/GOARCH pairs the graphs are listed for: the
// collector's BPF code builds on Linux only, so each platform has its own
// graph.
var platforms = []struct{ goos, goarch string }{
	{"linux", "amd64"},
	{"linux", "arm64"},
	{"darwin", "arm64"},
}

func TestDeps(t *testing.T) {
	gobin := goCommand(t)
	for _, g := range guarded {
		t.Run(g.pkg, func(t *testing.T) {
			for _, p := range platforms {
				t.Run(p.goos+"_"+p.goarch, func(t *testing.T) {
					t.Parallel()
					deps := listDeps(t, gobin, module+"/"+g.pkg, p.goos, p.goarch)
					for _, v := range violations(module+"/"+g.pkg, deps, g.stdOnly, g.allow, g.deny) {
						t.Errorf("%s on %s/%s", v, p.goos, p.goarch)
					}
				})
			}
		})
	}
}

// TestDepsCatchesALayerBroken breaks a layer for real, with an overlay
// that adds to record/pkgview a file importing the collector (and to
// kernel/cgroup one importing the resolver), and checks that the rules
// report both: a guard that cannot fail guards nothing.
func TestDepsCatchesALayerBroken(t *testing.T) {
	gobin := goCommand(t)
	root := moduleRoot(t, gobin)
	dir := t.TempDir()
	files := map[string]string{
		filepath.Join(root, "record", "pkgview", "zz_broken_layer.go"): "package pkgview\n\nimport _ \"" + module + "/collector\"\n",
		filepath.Join(root, "kernel", "cgroup", "zz_broken_layer.go"):  "package cgroup\n\nimport _ \"" + module + "/resolver\"\n",
	}
	replace := map[string]string{}
	i := 0
	for path, src := range files {
		f := filepath.Join(dir, fmt.Sprintf("%d.go", i))
		i++
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		replace[path] = f
	}
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ pkg, bad string }{
		{"record/...", module + "/collector"},
		{"kernel/...", module + "/resolver"},
	} {
		var found bool
		for _, g := range guarded {
			if g.pkg != c.pkg {
				continue
			}
			found = true
			deps := listDeps(t, gobin, module+"/"+g.pkg, "linux", "amd64", "-overlay="+overlayFile)
			v := violations(module+"/"+g.pkg, deps, g.stdOnly, g.allow, g.deny)
			if !slices.ContainsFunc(v, func(line string) bool { return strings.Contains(line, "depends on "+c.bad+",") }) {
				t.Errorf("%s: the overlay's import of %s was not reported", c.pkg, c.bad)
			}
			for _, line := range v {
				t.Logf("%s: reported: %s", c.pkg, line)
			}
		}
		if !found {
			t.Errorf("no rule guards %s", c.pkg)
		}
	}
}

// TestDenyListsNameRealPackages fails on a deny key that matches neither a
// package of the module's import graph nor a directory of the module, so
// that a misspelt path does not pass for a guard.
func TestDenyListsNameRealPackages(t *testing.T) {
	gobin := goCommand(t)
	root := moduleRoot(t, gobin)
	all := listDeps(t, gobin, module+"/...", "linux", "amd64")
	for _, g := range guarded {
		for _, pat := range append(slices.Collect(maps.Keys(g.deny)), module+"/"+g.pkg) {
			if matchesAny(pat, all) {
				continue
			}
			rel, ok := strings.CutPrefix(strings.TrimSuffix(pat, "/..."), module+"/")
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); ok && err == nil {
				continue
			}
			t.Errorf("%s: %q matches no package that the module builds on linux/amd64 and no directory of the module", g.pkg, pat)
		}
	}
}

// violations returns a line for each package in deps (the import graph
// of the pattern pkg) that stdOnly, allow or deny forbids.
func violations(pkg string, deps map[string]bool, stdOnly bool, allow []string, deny map[string]string) []string {
	var out []string
	for _, dep := range slices.Sorted(maps.Keys(deps)) {
		if match(pkg, dep) {
			continue
		}
		if stdOnly && !deps[dep] && !slices.ContainsFunc(allow, func(pat string) bool { return match(pat, dep) }) {
			out = append(out, fmt.Sprintf("%s depends on %s, which is not in the standard library", pkg, dep))
		}
		for _, pat := range slices.Sorted(maps.Keys(deny)) {
			if match(pat, dep) {
				out = append(out, fmt.Sprintf("%s depends on %s, which it must not (%s)", pkg, dep, deny[pat]))
			}
		}
	}
	return out
}

// listDeps returns the packages of the import graph of pattern for
// goos/goarch (the test's own imports are not in it), and whether each
// is in the standard library.
func listDeps(t *testing.T, gobin, pattern, goos, goarch string, flags ...string) map[string]bool {
	t.Helper()
	args := append(append([]string{"list", "-deps"}, flags...), "-f", "{{.ImportPath}} {{.Standard}}", pattern)
	cmd := exec.Command(gobin, args...)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("GOOS=%s GOARCH=%s go list -deps %s: %v\n%s", goos, goarch, pattern, err, ee.Stderr)
		}
		t.Fatalf("GOOS=%s GOARCH=%s go list -deps %s: %v", goos, goarch, pattern, err)
	}
	deps := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, ok := strings.Cut(l, " ")
		if !ok {
			t.Fatalf("go list -deps %s: unexpected line %q", pattern, l)
		}
		deps[path] = std == "true"
	}
	return deps
}

// match reports whether the import path p matches pat: the same path, or
// for a pat ending in "/...", the path before it or one beneath it.
func match(pat, p string) bool {
	if base, ok := strings.CutSuffix(pat, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pat
}

func matchesAny(pat string, deps map[string]bool) bool {
	for p := range deps {
		if match(pat, p) {
			return true
		}
	}
	return false
}

// goCommand returns the go command, or skips the test without it.
func goCommand(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipping: the go command is not on PATH, so the import graphs cannot be listed")
	}
	return gobin
}

// moduleRoot returns the directory of the module being tested.
func moduleRoot(t *testing.T, gobin string) string {
	t.Helper()
	out, err := exec.Command(gobin, "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func TestMatch(t *testing.T) {
	for _, tt := range []struct {
		pat, path string
		want      bool
	}{
		{module + "/policies", module + "/policies", true},
		{module + "/policies", module + "/policies/egress", false},
		{module + "/policies", module + "/policiesx", false},
		{"github.com/cilium/ebpf/...", "github.com/cilium/ebpf", true},
		{"github.com/cilium/ebpf/...", "github.com/cilium/ebpf/link", true},
		{"github.com/cilium/ebpf/...", "github.com/cilium/ebpfx", false},
	} {
		if got := match(tt.pat, tt.path); got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.pat, tt.path, got, tt.want)
		}
	}
}
