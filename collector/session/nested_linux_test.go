//go:build linux

package session_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/collector/session"
)

// TestNested: a cgroup nested in a running session's maps to the session
// in Lookup; a process started into it with CgroupFD runs there as root
// (no seccomp filter, no session uid); Close refuses while it runs, and
// once it has exited removes the cgroup and its Lookup entry. A session
// not yet started has none, and Terminate kills what runs in one.
func TestNested(t *testing.T) {
	r := &recorder{}
	m := newManager(t, r)
	s := create(t, m, session.Spec{})
	if _, err := s.NewNested("apt"); !errors.Is(err, session.ErrState) {
		t.Fatalf("NewNested before Start = %v, want ErrState", err)
	}
	if err := s.Start(context.Background(), exec.Command("/bin/sleep", "60")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NewNested("a/b"); !errors.Is(err, session.ErrInvalidSpec) {
		t.Errorf(`NewNested("a/b") = %v, want ErrInvalidSpec`, err)
	}
	n, err := s.NewNested("apt")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(n.Path()) != s.CgroupPath() {
		t.Errorf("nested cgroup %s is not in the session's %s", n.Path(), s.CgroupPath())
	}
	if id, ok := m.Lookup(n.ID()); !ok || id != s.ID() {
		t.Errorf("Lookup(nested) = %q, %v, want %q", id, ok, s.ID())
	}
	cmd := exec.Command("/bin/sh", "-c", "grep -E '^(Uid|Seccomp):' /proc/self/status; cat /proc/self/cgroup; exec sleep 60")
	var out strings.Builder
	cmd.Stdout = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: n.FD()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "::/") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := out.String()
	rel := strings.TrimPrefix(n.Path(), s.CgroupPath())
	if !strings.Contains(got, rel+"\n") || !strings.Contains(got, "Seccomp:\t0") || !strings.Contains(got, "Uid:\t0\t") {
		t.Errorf("the nested process's status and cgroup:\n%s\nwant uid 0, no seccomp, in ...%s", got, rel)
	}
	if err := n.Close(); err == nil {
		t.Errorf("Close with a process in the cgroup = nil, want an error")
	}
	cmd.Process.Kill()
	cmd.Wait()
	n2, err := s.NewNested("apt")
	if err != nil {
		t.Fatal(err)
	}
	if n2.Path() == n.Path() {
		t.Errorf("two nested cgroups share %s", n.Path())
	}
	if err := n2.Close(); err != nil {
		t.Fatalf("Close of an empty nested cgroup = %v", err)
	}
	if _, err := os.Stat(n2.Path()); !os.IsNotExist(err) {
		t.Errorf("after Close, %s: %v", n2.Path(), err)
	}
	if _, ok := m.Lookup(n2.ID()); ok {
		t.Errorf("Lookup(closed nested cgroup) still names the session")
	}
	if err := n2.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}

	// Terminate kills what runs in a nested cgroup; Cleanup removes it and
	// drops its Lookup entry.
	n3, err := s.NewNested("apt")
	if err != nil {
		t.Fatal(err)
	}
	kid := exec.Command("/bin/sleep", "60")
	kid.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: n3.FD()}
	if err := kid.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- kid.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Terminate(ctx, session.ReasonAPI, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the nested process ended with %v, want SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Terminate left the nested process running")
	}
	if err := s.Cleanup(ctx, session.FSDeleted); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Lookup(n3.ID()); ok {
		t.Errorf("Lookup(nested) after Cleanup still names the session")
	}
	if _, err := os.Stat(n3.Path()); !os.IsNotExist(err) {
		t.Errorf("after Cleanup, %s: %v", n3.Path(), err)
	}
}
