package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/test/shimtest"
)

// TestFastPathExecs runs the built shim, linked as npm, cargo and pip,
// in front of fake real managers, with Go's init trace on: a read-only
// call is exec'd before main's package is initialized (the trace stops
// at the fast path), anything else reaches main, and both end as the
// real manager does, with its argv and exit code.
func TestFastPathExecs(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "sandtrail-shim")
	if err := shimtest.Build(shim); err != nil {
		t.Fatal(err)
	}
	shimDir, realDir := filepath.Join(dir, "shims"), filepath.Join(dir, "real")
	if err := shimtest.Link(shim, shimDir, "npm", "cargo", "pip"); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(realDir, 0o755)
	for _, name := range []string{"npm", "cargo", "pip"} {
		script := "#!/bin/sh\necho \"real " + name + ": $*\"\nexit 3\n"
		if err := os.WriteFile(filepath.Join(realDir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	work := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		env  string
		fast bool
		code int
	}{
		{"npm", []string{"--version"}, "", true, 3},
		{"npm", []string{"view", "left-pad", "version"}, "", true, 3},
		{"npm", []string{"run", "build"}, "", false, 3},
		{"cargo", []string{"-V"}, "", true, 3},
		{"cargo", []string{"version"}, "", false, 3},
		{"pip", []string{"list"}, "", true, 3},
		{"pip", []string{"--version"}, "SANDTRAIL_REAL_PIP=" + filepath.Join(realDir, "pip"), true, 3},
		{"pip", []string{"--version"}, "SANDTRAIL_REAL_PIP=pip", false, 127},
	} {
		cmd := exec.Command(filepath.Join(shimDir, tc.name), tc.args...)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + shimDir + ":" + realDir + ":/usr/bin:/bin", "HOME=" + work, "GODEBUG=inittrace=1"}
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s %q: %v", tc.name, tc.args, err)
		}
		call := tc.name + " " + strings.Join(tc.args, " ")
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d (stderr %s)", call, code, tc.code, stderr.String())
		}
		if want := "real " + tc.name + ": " + strings.Join(tc.args, " ") + "\n"; tc.code == 3 && string(out) != want {
			t.Errorf("%s: stdout %q, want %q", call, out, want)
		}
		// The trace names a package once its init has returned: the fast
		// path's never does, since it execs.
		trace := stderr.String()
		if !strings.Contains(trace, "init os @") {
			t.Fatalf("%s: no init trace:\n%s", call, trace)
		}
		passed := !strings.Contains(trace, "init github.com/sandtrail/sandtrail/shims/passthrough @")
		if main := strings.Contains(trace, "init main @"); passed != tc.fast || main == tc.fast {
			t.Errorf("%s: exec'd from the fast path %v, main initialized %v; want fast path %v", call, passed, main, tc.fast)
		}
	}
}
