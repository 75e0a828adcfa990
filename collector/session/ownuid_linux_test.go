//go:build linux

package session_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/collector/session"
)

// TestOwnUID: sessions with an Agent get uids of their own from the range,
// named as the agent in the session's /etc/passwd; one cannot signal the
// other; the preserved files of the uid become root's, and the uid is
// given back at Cleanup.
func TestOwnUID(t *testing.T) {
	r := &recorder{}
	needRoot(t)
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o711); err != nil { // the agents reach their workdirs
			t.Fatal(err)
		}
	}
	rng := session.UIDRange{First: 0x5a00f000, Count: 16}
	m, err := session.NewManager(hclog.NewNullLogger(), r.emit, session.WithRoot(root), session.WithUIDRange(rng))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	agent := &session.Agent{Name: "sandtrail-test-agent", GID: 65534}
	run := func(s *session.Session, script string) {
		t.Helper()
		uid, ok := s.UID()
		if !ok || uid < rng.First || uid >= rng.First+rng.Count {
			t.Fatalf("UID() = %d, %v, want one of the range", uid, ok)
		}
		if err := os.Chown(s.Workdir(), int(uid), int(agent.GID)); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: agent.GID, Groups: []uint32{}}}
		if err := s.Start(ctx, cmd); err != nil {
			t.Fatalf("Start() = %v", err)
		}
	}
	b := create(t, m, session.Spec{Agent: agent})
	run(b, "echo $$ > pid; exec sleep 60")
	a := create(t, m, session.Spec{Agent: agent})
	ua, _ := a.UID()
	ub, _ := b.UID()
	if ua == ub {
		t.Fatalf("both sessions have uid %d", ua)
	}
	var bPid string
	waitFor := func(p string) []byte {
		t.Helper()
		for range 500 {
			if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
				return b
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("no %s", p)
		return nil
	}
	bPid = strings.TrimSpace(string(waitFor(filepath.Join(b.Workdir(), "pid"))))
	run(a, "{ id -un; kill -0 "+bPid+" && echo killed || echo refused; } > out.tmp; mv out.tmp out")
	out := string(waitFor(filepath.Join(a.Workdir(), "out")))
	if out != "sandtrail-test-agent\nrefused\n" {
		t.Errorf("session a says %q, want its name and the kill refused", out)
	}
	if reason, _ := waitDone(t, a, 30*time.Second); reason != session.ReasonNormal {
		t.Errorf("a ended %s, want normal", reason)
	}
	if err := a.Cleanup(ctx, session.FSPreserved); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(a.Workdir(), "out"), &st); err != nil || st.Uid != 0 {
		t.Errorf("preserved out: uid %d, %v, want root's", st.Uid, err)
	}
	c := create(t, m, session.Spec{Agent: agent})
	if uc, _ := c.UID(); uc != ua {
		t.Errorf("the next session's uid = %d, want %d, given back by a", uc, ua)
	}
}
