package deps

import (
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sandtrail/sandtrail"

// guarded are the packages whose imports are restricted. A deny key is an
// import path, or a path ending in "/..." for it and everything beneath it
// (as in go list's patterns); its value says why it is denied.
var guarded = []struct {
	// pkg is the import path, relative to the module.
	pkg string
	// stdOnly allows only the standard library (and the package itself),
	// and the module's packages in allow.
	stdOnly bool
	allow   []string
	deny    map[string]string
	// future marks a package that may not exist yet: its check is
	// skipped until it does.
	future bool
}{
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
		pkg: "collector",
		deny: map[string]string{
			module + "/policies":            "the policy engine: the collector takes its egress table through EgressPolicy and policies/egress",
			"github.com/spf13/viper/...":    "configuration belongs to the binaries",
			"go.yaml.in/yaml/...":           "YAML is the policy loader's",
			"modernc.org/sqlite/...":        "SQLite is the index's",
			"pault.ag/go/debian/...":        "the Debian parser is the resolver's",
			module + "/registry-mirror/...": "the mirror is a separate producer",
			module + "/record/index/...":    "the index (SQLite) is a consumer",
			module + "/resolver/...":        "version parsing is the policy engine's and the mirror's",
			"github.com/spf13/cobra/...":    "commands are cmd/sandtrail's",
			module + "/cmd/...":             "a binary is never imported",
		},
	},
	{
		pkg: "cmd/sandtrail-shim",
		deny: map[string]string{
			"github.com/cilium/ebpf/...":        "BPF is the daemon's: the shim runs as the agent",
			"modernc.org/sqlite/...":            "SQLite is the daemon's index",
			module + "/registry-mirror/...":     "the mirror runs in the daemon; the shim only points the package manager at it",
			module + "/collector/...":           "the eBPF collector and the sessions run in the daemon",
			module + "/policies/...":            "the policy is the daemon's: the shim asks it over the ingest socket",
			module + "/daemon/...":              "the host is the daemon",
			module + "/record/journal/...":      "the journal is the daemon's",
			module + "/shims/apt/broker/...":    "the apt broker runs as root in the daemon",
			"github.com/spf13/...":              "the shim has no flags or config files of its own",
			"go.yaml.in/yaml/...":               "the shim parses no policy",
			"github.com/hashicorp/go-hclog/...": "the shim's messages are a few lines on stderr",
		},
	},
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
	root := moduleRoot(t, gobin)
	for _, g := range guarded {
		t.Run(g.pkg, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(g.pkg))); errors.Is(err, os.ErrNotExist) && g.future {
				t.Skipf("skipping: %s does not exist yet; once it does it must not import %s", g.pkg, strings.Join(slices.Sorted(maps.Keys(g.deny)), ", "))
			}
			for _, p := range platforms {
				t.Run(p.goos+"_"+p.goarch, func(t *testing.T) {
					t.Parallel()
					checkDeps(t, gobin, module+"/"+g.pkg, p.goos, p.goarch, g.stdOnly, g.allow, g.deny)
				})
			}
		})
	}
}

// TestDenyListsNameRealPackages fails on a deny key that matches neither a
// package of the module's import graph nor a directory of the module (the
// mirror has none of its Go code yet), so that a misspelt path does not
// pass for a guard.
func TestDenyListsNameRealPackages(t *testing.T) {
	gobin := goCommand(t)
	root := moduleRoot(t, gobin)
	all := listDeps(t, gobin, module+"/...", "linux", "amd64")
	for _, g := range guarded {
		for pat := range g.deny {
			if matchesAny(pat, all) {
				continue
			}
			rel, ok := strings.CutPrefix(strings.TrimSuffix(pat, "/..."), module+"/")
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); ok && err == nil {
				continue
			}
			t.Errorf("%s: deny key %q matches no package that the module builds on linux/amd64 and no directory of the module", g.pkg, pat)
		}
	}
}

// checkDeps lists the import graph of pkg for goos/goarch and reports each
// package in it that stdOnly (but for allow) or deny forbids.
func checkDeps(t *testing.T, gobin, pkg, goos, goarch string, stdOnly bool, allow []string, deny map[string]string) {
	deps := listDeps(t, gobin, pkg, goos, goarch)
	if _, ok := deps[pkg]; !ok {
		t.Fatalf("go list -deps %s did not list %s itself", pkg, pkg)
	}
	for _, dep := range slices.Sorted(maps.Keys(deps)) {
		std := deps[dep]
		if dep == pkg {
			continue
		}
		if stdOnly && !std && !slices.Contains(allow, dep) {
			t.Errorf("%s depends on %s on %s/%s, which is not in the standard library", pkg, dep, goos, goarch)
		}
		for pat, why := range deny {
			if match(pat, dep) {
				t.Errorf("%s depends on %s on %s/%s, which it must not (%s)", pkg, dep, goos, goarch, why)
			}
		}
	}
}

// listDeps returns the packages of the import graph of pattern for
// goos/goarch (the test's own imports are not in it), and whether each
// is in the standard library.
func listDeps(t *testing.T, gobin, pattern, goos, goarch string) map[string]bool {
	t.Helper()
	cmd := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pattern)
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
