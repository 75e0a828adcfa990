package cargo

import (
	"reflect"
	"strings"
	"testing"
	"time"

	toml "github.com/pelletier/go-toml/v2"
)

func FuzzPlan(f *testing.F) {
	for _, s := range []string{"install ripgrep", "+nightly install --git=x a@1", "--config a=b build", "-C x -Zy fetch --manifest-path M",
		"add a@=1.2.3 --path p", "--version", "install --list", "install -- x", "-Fx install"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, " ")
		p, err := Plan(args, ctx(t.TempDir(), nil))
		if err != nil || p == nil {
			return
		}
		// The mirror's configuration is always there, before the command.
		if len(p.Args) < 4 || p.Args[len(p.Args)-len(args)] != args[0] && !strings.HasPrefix(args[0], "+") {
			t.Fatalf("Plan(%q).Args = %q", args, p.Args)
		}
		if inv := parseArgs(args); inv.cmd == "install" && len(p.Requests) == 0 {
			t.Fatalf("Plan(%q): an install without requests", args)
		}
	})
}

// FuzzManifest checks the TOML parser against go-toml: a document both
// accept must give the same strings where the manifest's readers look.
func FuzzManifest(f *testing.F) {
	f.Add(manifest)
	f.Add(lockAfter)
	f.Add("a.b = 'x'\n[c]\nd = [\"e\", 'f']\n[[g]]\nh = {i = \"\\u00e9\"}\n")
	f.Add("x = '''\n''''\n")
	f.Fuzz(func(t *testing.T, s string) {
		mine, err := parseTOML(s)
		if err != nil {
			return
		}
		_ = manifestDeps(mine, "Cargo.toml", nil)
		var theirs map[string]any
		if toml.Unmarshal([]byte(s), &theirs) != nil {
			return
		}
		if !sameStrings(mine, theirs) {
			t.Fatalf("parseTOML(%q) = %#v, go-toml %#v", s, mine, theirs)
		}
	})
}

// sameStrings compares the tables, arrays and strings of two trees.
func sameStrings(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if !sameStrings(v, y[k]) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok {
			if z, ok := b.([]map[string]any); ok && len(z) == len(x) {
				for i := range x {
					if !sameStrings(x[i], z[i]) {
						return false
					}
				}
				return true
			}
			return false
		}
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameStrings(x[i], y[i]) {
				return false
			}
		}
		return true
	case string:
		return reflect.DeepEqual(a, b)
	case scalar:
		switch b.(type) {
		case string, map[string]any, []any:
			return false
		case time.Time, toml.LocalDate, toml.LocalDateTime, toml.LocalTime:
		}
		return true
	}
	return false
}

func FuzzLock(f *testing.F) {
	f.Add(lockAfter)
	f.Add(lockBefore)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseLock([]byte(s))
		if err != nil {
			return
		}
		_ = lockResult(lockState{}, lockState{pkgs: p}, nil)
	})
}
