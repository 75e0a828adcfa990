package launch

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheckKeep(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{name: "default", in: "", want: "preserved", ok: true},
		{name: "snapshot", in: "snapshot", want: "snapshot", ok: true},
		{name: "deleted", in: "deleted", want: "deleted", ok: true},
		{name: "unknown", in: "shredded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CheckKeep(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("CheckKeep(%q) = %q, %v, want %q (ok %v)", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestCommandEnv(t *testing.T) {
	in := []string{"PATH=/opt/bin:/usr/bin", "HOME=/root", "USER=root", "SUDO_USER=alice", "TERM=xterm", "API_KEY=k"}
	got := Env(in, "/w", Account{Name: "agent", UID: 5}, "s1")
	want := []string{"PATH=/opt/bin:/usr/bin", "TERM=xterm", "API_KEY=k", "HOME=/w", "USER=agent", "LOGNAME=agent", "PWD=/w", "SANDTRAIL_SESSION_ID=s1"}
	if !slices.Equal(got, want) {
		t.Errorf("Env() = %q, want %q", got, want)
	}
	if got := Env(nil, "/w", Account{Name: "a"}, "s"); !slices.Contains(got, "PATH=/usr/local/bin:/usr/bin:/bin") {
		t.Errorf("Env(nil) = %q, want a default PATH", got)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=/nonexistent:" + dir}
	tests := []struct {
		name, in, want string
		notFound       bool
	}{
		{name: "found on PATH", in: "tool", want: exe},
		{name: "with a slash, as is", in: "./x/y", want: "./x/y"},
		{name: "not executable", in: "data", notFound: true},
		{name: "missing", in: "nope", notFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LookPath(tt.in, env)
			if tt.notFound {
				if err == nil || ExitStatus(err) != 127 {
					t.Errorf("LookPath(%q) = %q, %v, want a not-found error (status 127)", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("LookPath(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestReachable(t *testing.T) {
	dir, err := os.MkdirTemp("", "reachable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	inner := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	for p := filepath.Dir(dir); p != "/"; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not searchable by others; cannot test from here", p)
		}
	}
	nobody := Account{Name: "nobody", UID: 65534, GID: 65534}
	if err := Reachable(inner, nobody); err != nil {
		t.Errorf("Reachable(%s) = %v, want nil", inner, err)
	}
	if err := os.Chmod(filepath.Join(dir, "a"), 0o750); err != nil {
		t.Fatal(err)
	}
	err = Reachable(inner, nobody)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "a")) {
		t.Errorf("Reachable(%s) with a 0750 parent = %v, want an error naming it", inner, err)
	}
	if err := Reachable(inner, Account{Name: "root"}); err != nil {
		t.Errorf("Reachable() as root = %v, want nil", err)
	}
}

// TestRunNoAgentUser: without sandtrail-agent and without --user, run
// fails before doing anything, and says what to do.
func TestRunNoAgentUser(t *testing.T) {
	if _, err := LookupAccount(""); err == nil {
		t.Skip("sandtrail-agent exists on this machine")
	}
	_, err := LookupAccount("")
	if err != ErrNoAgentUser || !strings.Contains(err.Error(), "install.sh") || !strings.Contains(err.Error(), "--user") {
		t.Errorf("LookupAccount(\"\") = %v, want ErrNoAgentUser naming install.sh and --user", err)
	}
}
