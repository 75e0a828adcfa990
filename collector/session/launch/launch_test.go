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
	in := []string{"PATH=/root/.pyenv/shims:/usr/bin", "HOME=/root", "USER=root", "SUDO_USER=alice", "TERM=xterm", "API_KEY=k",
		"LC_ALL=C", "SSH_AUTH_SOCK=/tmp/s", "AWS_SECRET_ACCESS_KEY=x", "HTTPS_PROXY=http://p"}
	got := Env(in, nil, "/w", Account{Name: "agent", UID: 5}, "s1")
	want := []string{"PATH=" + SessionPath, "TERM=xterm", "LC_ALL=C", "HOME=/w", "USER=agent", "LOGNAME=agent", "PWD=/w", "SANDTRAIL_SESSION_ID=s1"}
	if !slices.Equal(got, want) {
		t.Errorf("Env() = %q, want %q (only the allowlist of the caller's environment)", got, want)
	}
	got = Env(in, []string{"FOO=bar", "PATH=/custom", "HOME=/evil", "SANDTRAIL_SESSION_ID=forged"}, "/w", Account{Name: "a"}, "s")
	want = []string{"TERM=xterm", "LC_ALL=C", "FOO=bar", "PATH=/custom", "HOME=/w", "USER=a", "LOGNAME=a", "PWD=/w", "SANDTRAIL_SESSION_ID=s"}
	if !slices.Equal(got, want) {
		t.Errorf("Env(set) = %q, want %q (set replaces PATH, not the session's own)", got, want)
	}
}

func TestLookPath(t *testing.T) {
	dir, err := os.MkdirTemp("", "lookpath-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	for p := filepath.Dir(dir); p != "/"; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not searchable by others; cannot test from here", p)
		}
	}
	open, closed := filepath.Join(dir, "open"), filepath.Join(dir, "closed")
	os.Mkdir(open, 0o755)
	os.Mkdir(closed, 0o700) // root's, as /root is
	for _, d := range []string{open, closed} {
		os.WriteFile(filepath.Join(d, "tool"), []byte("#!/bin/sh\n"), 0o755)
	}
	os.WriteFile(filepath.Join(open, "data"), nil, 0o644)
	os.WriteFile(filepath.Join(open, "mine"), []byte("#!/bin/sh\n"), 0o700)
	nobody := Account{Name: "nobody", UID: 65534, GID: 65534}
	root := Account{Name: "root"}
	env := []string{"PATH=/nonexistent:" + closed + ":" + open}
	tests := []struct {
		name, in string
		acct     Account
		want     string
		err      string
	}{
		{name: "skips a directory the agent cannot reach", in: "tool", acct: nobody, want: filepath.Join(open, "tool")},
		{name: "root takes the first", in: "tool", acct: root, want: filepath.Join(closed, "tool")},
		{name: "with a slash, checked", in: filepath.Join(closed, "tool"), acct: nobody, err: closed + " is mode"},
		{name: "not executable", in: "data", acct: nobody, err: "it is mode -rw-r--r--"},
		{name: "owner-only executable", in: "mine", acct: nobody, err: "cannot be run by nobody"},
		{name: "missing", in: "nope", acct: nobody, err: "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LookPath(tt.in, env, tt.acct)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("LookPath(%q) = %q, %v, want an error containing %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("LookPath(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
			}
		})
	}
	if _, err := LookPath("nope", env, nobody); ExitStatus(err) != 127 {
		t.Errorf("ExitStatus(not found) = %d, want 127", ExitStatus(err))
	}
	if _, err := LookPath("mine", env, nobody); ExitStatus(err) != 126 {
		t.Errorf("ExitStatus(not runnable) = %d, want 126", ExitStatus(err))
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

func TestParseEnv(t *testing.T) {
	got, err := ParseEnv([]string{"# c", "", "A=1", "B_2==x=y", "  "})
	if err != nil || !slices.Equal(got, []string{"A=1", "B_2==x=y"}) {
		t.Errorf("ParseEnv = %q, %v", got, err)
	}
	for _, bad := range []string{"noequals", "1A=x", "A B=x", "=x", "A=\x00"} {
		if _, err := ParseEnv([]string{bad}); err == nil {
			t.Errorf("ParseEnv(%q) = nil error", bad)
		}
	}
}

func FuzzParseEnv(f *testing.F) {
	f.Add("A=1\n# c\nB=2")
	f.Fuzz(func(t *testing.T, s string) {
		out, err := ParseEnv(strings.Split(s, "\n"))
		if err != nil {
			return
		}
		for _, kv := range out {
			k, _, ok := strings.Cut(kv, "=")
			if !ok || !envName(k) {
				t.Fatalf("ParseEnv(%q) gave %q", s, kv)
			}
		}
	})
}
