package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// diskFillHelper takes MiB and directories (or "~" for the home): into
// each it writes MiB mebibytes to sandtrail-diskquota-<session id>, keeping
// what was written, and prints "DIR RESULT": OK, ENOSPC, EDQUOT or the
// error. It then waits 2 s, for the limit monitor to see the full disk,
// and runs /bin/echo after-full, an exec that is recorded after the hit.
func diskFillHelper(args []string) int {
	var mib int
	fmt.Sscan(args[0], &mib)
	name := "sandtrail-diskquota-" + os.Getenv("SANDTRAIL_SESSION_ID")
	buf := bytes.Repeat([]byte{'x'}, 1<<20)
	for _, dir := range args[1:] {
		p := filepath.Join(dir, name)
		if dir == "~" {
			p = filepath.Join(os.Getenv("HOME"), name)
		}
		fmt.Println(dir, diskFill(p, buf, mib))
	}
	time.Sleep(2 * time.Second)
	out, err := exec.Command("/bin/echo", "after-full").CombinedOutput()
	fmt.Printf("%s%v\n", out, err)
	return 0
}

func diskFill(p string, buf []byte, mib int) string {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		for range mib {
			if _, err = f.Write(buf); err != nil {
				break
			}
		}
		err = errors.Join(err, f.Close())
	}
	switch {
	case err == nil:
		return "OK"
	case errors.Is(err, syscall.ENOSPC):
		return "ENOSPC"
	case errors.Is(err, syscall.EDQUOT):
		return "EDQUOT"
	}
	return err.Error()
}

// TestDiskQuota: with --disk 1M, the agent writes
// 8 MiB to /tmp, /var/tmp, /dev/shm, /run/lock and its home. Every write
// stops at the quota with ENOSPC, one disk_quota limit.hit is recorded, the
// journal goes on appending (the exec after the hit is journaled and the
// journal verifies), none of the files reaches the host's directories,
// and the preserved workdir holds what the kernel let through.
func TestDiskQuota(t *testing.T) {
	e := newEnv(t)
	places := []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock", "~"}
	r := e.run(append([]string{"--disk", "1M", "--timeout", "60s", "--"}, helperCmd("diskfill", append([]string{"8"}, places...)...)...)...)
	id := r.summary.SessionID
	name := "sandtrail-diskquota-" + id
	for _, p := range places {
		if !strings.Contains(r.stdout, p+" ENOSPC\n") && !strings.Contains(r.stdout, p+" EDQUOT\n") {
			t.Errorf("writing 8 MiB to %s: want ENOSPC or EDQUOT; helper said:\n%s%s", p, r.stdout, r.stderr)
		}
		if p == "~" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(p, name)); !errors.Is(err, os.ErrNotExist) {
			os.Remove(filepath.Join(p, name))
			t.Errorf("host's %s/%s: Lstat() = %v, want not exist (the session's %s is private)", p, name, err, p)
		}
	}
	if fi, err := os.Stat(filepath.Join(r.summary.Workdir, name)); err != nil || fi.Size() > 1<<20 {
		t.Errorf("preserved workdir file: Stat() = %v, %v, want at most 1 MiB", fi, err)
	}
	evs := e.events(id)
	hits := limitHits(evs, "disk_quota")
	if len(hits) == 0 {
		t.Fatalf("no disk_quota limit.hit in %d events; summary %+v\n%s", len(evs), r.summary, r.stderr)
	}
	if l := hits[0].Limit; l.Configured != 1<<20 || l.Measured < 1<<20-4096 || l.Unit != "bytes" {
		t.Errorf("disk_quota = %+v, want configured 1 MiB and as much measured, in bytes", l)
	}
	if !journaledAfter(evs, hits[0].Seq, func(ev *event.Event) bool {
		return ev.Kind == "process.exec" && ev.Proc != nil && strings.Join(ev.Proc.Argv, " ") == "/bin/echo after-full"
	}) {
		t.Errorf("no process.exec of /bin/echo after-full journaled after the disk_quota hit (seq %d)", hits[0].Seq)
	}
	if term := terminate(t, evs); term.Reason != "normal" {
		t.Errorf("session.terminate reason = %q, want normal (a full disk refuses writes, it ends nothing)", term.Reason)
	}
	e.verify()
}

// journaledAfter reports whether an event matching f has a seq above seq.
func journaledAfter(evs []*event.Event, seq uint64, f func(*event.Event) bool) bool {
	for _, ev := range evs {
		if ev.Seq > seq && f(ev) {
			return true
		}
	}
	return false
}
