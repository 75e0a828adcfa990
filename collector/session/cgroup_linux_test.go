//go:build linux

package session

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/record/event"
)

// TestFreeze exercises both freezers for real, whatever the session
// manager would choose on this host: v1 freezer.state in a v1 freezer
// cgroup, and v2 cgroup.freeze in a v2 cgroup (which needs no controller).
func TestFreeze(t *testing.T) {
	cgrouptest.RequireRoot(t)
	l, err := readLayout()
	if err != nil {
		t.Skipf("no usable cgroup layout: %v", err)
	}
	tests := []struct {
		name   string
		parent string
		freeze func(context.Context, string, bool) error
		skip   string
	}{
		{"v2 cgroup.freeze", l.V2.Path, freezeV2, ""},
		{"v1 freezer.state", l.V1["freezer"].Path, freezeV1, "no v1 freezer hierarchy (pure v2 host)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.parent == "" {
				t.Skip(tt.skip)
			}
			dir := filepath.Join(tt.parent, fmt.Sprintf("sandtrail-freezetest-%d", os.Getpid()))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "n")
			cmd := exec.Command("sh", "-c", `i=0; while :; do i=$((i+1)); echo $i > "$1"; done`, "sh", file)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				cmd.Process.Kill()
				cmd.Wait()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := removeTree(ctx, dir); err != nil {
					t.Errorf("removeTree() = %v", err)
				}
			})
			// A test may move a running process; sessions never do.
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
				t.Fatal(err)
			}
			read := func() int {
				b, _ := os.ReadFile(file)
				n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				return n
			}
			for deadline := time.Now().Add(30 * time.Second); read() == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("counter never started")
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := tt.freeze(ctx, dir, true); err != nil {
				t.Fatalf("freeze(true) = %v", err)
			}
			before := read()
			time.Sleep(500 * time.Millisecond)
			if after := read(); after != before {
				t.Errorf("counter moved from %d to %d while frozen", before, after)
			}
			if err := tt.freeze(ctx, dir, false); err != nil {
				t.Fatalf("freeze(false) = %v", err)
			}
			for deadline := time.Now().Add(30 * time.Second); read() <= before; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("counter did not move after thawing")
				}
			}
		})
	}
}

func TestExited(t *testing.T) {
	if exited(os.Getpid()) {
		t.Errorf("exited(self) = true, want false")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); !exited(pid); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("exited(%d) = false for a zombie", pid)
		}
	}
	cmd.Wait()
	if !exited(pid) {
		t.Errorf("exited(%d) = false after reaping", pid)
	}
}

// TestKillWithoutCgroupKill runs the fallback of kernels before 5.14 for
// real: freeze, SIGKILL every member, thaw, against a fork loop.
func TestKillWithoutCgroupKill(t *testing.T) {
	cgrouptest.RequireRoot(t)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash for a fork loop that survives refused forks")
	}
	m, err := NewManager(nil, func(*event.Event) {}, WithRoot(t.TempDir()))
	if err != nil {
		t.Skipf("no session manager: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := m.Create(ctx, Spec{Limits: event.Limits{Pids: 64}})
	if err != nil {
		t.Fatalf("Create() = %v", err)
	}
	defer s.Cleanup(ctx, FSDeleted)
	s.cg.noKillFile = true
	if err := s.Start(ctx, exec.Command("bash", "-c", "while :; do sleep 100 & done")); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		p, _ := s.cg.pids()
		if len(p) >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fork loop reached %d processes", len(p))
		}
	}
	if err := s.Terminate(ctx, ReasonAPI, nil); err != nil {
		t.Fatalf("Terminate() = %v", err)
	}
	if p, err := s.cg.pids(); err != nil || len(p) != 0 {
		t.Errorf("pids() after Terminate = %v, %v, want none", p, err)
	}
}
