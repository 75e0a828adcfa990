package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/collector"
	"github.com/sandtrail/sandtrail/record/event"
	mirror "github.com/sandtrail/sandtrail/registry-mirror"
)

// processes is the one attribution of a mirror client to a process: the
// kernel collector's record of its connect names the process (by the
// socket's cookie), and the process tree says whether a live shim started
// it. A process of uid 0 in a session was started by the daemon (the apt
// broker's apt and dpkg: the agent cannot become root), never around a
// shim.
type processes struct {
	col *collector.Collector
	// shim is the shim binary's identity (device and inode); ok is false
	// when it could not be found, and then nothing is called unshimmed.
	shim unix.Stat_t
	ok   bool
}

// maxAncestors bounds the walk up the process tree.
const maxAncestors = 128

// newProcesses returns the mirror's attribution of processes, with the
// shims of shimDir (nil without a collector).
func newProcesses(col *collector.Collector, shimDir string, log hclog.Logger) mirror.Processes {
	if col == nil {
		return nil
	}
	p := &processes{col: col}
	bin, err := filepath.EvalSymlinks(filepath.Join(shimDir, "npm"))
	if err == nil {
		err = unix.Stat(bin, &p.shim)
	}
	if err != nil {
		log.Warn("the shim binary is not found: the mirror names no fetch as around its shim", "shim_dir", shimDir, "error", err)
	} else {
		p.ok = true
	}
	return p
}

// Process names the process behind the connection whose socket has
// cookie, and whether it is an agent's process with no live shim among its
// ancestors.
func (p *processes) Process(cookie uint64) (event.Proc, bool, bool) {
	proc, _, ok := p.col.ConnSender(cookie)
	if !ok {
		return event.Proc{}, false, false
	}
	if !p.ok || proc.UID == nil || *proc.UID == 0 {
		return proc, false, true
	}
	shimmed, known := p.underShim(proc.Pid)
	return proc, known && !shimmed, true
}

// underShim reports whether pid or one of its ancestors runs the shim
// binary, or was started by the daemon: an ancestor of uid 0 in pid's own
// cgroup or beneath it (the apt broker's apt-get, whose http method runs
// as _apt; the daemon itself is in a cgroup above every session's). known
// is false when the tree could not be read (the process has exited), and
// then it is not called unshimmed.
func (p *processes) underShim(pid int32) (shimmed, known bool) {
	own, err := cgroupOf(pid)
	if err != nil {
		return false, false
	}
	for range maxAncestors {
		if pid <= 1 {
			return false, true
		}
		if p.isShim(pid) {
			return true, true
		}
		st, err := statusOf(pid)
		if err != nil {
			return false, false
		}
		if st.uid == 0 {
			if cg, err := cgroupOf(pid); err == nil && (cg == own || strings.HasPrefix(cg, own+"/")) {
				return true, true
			}
		}
		pid = st.ppid
	}
	return false, true
}

// isShim reports whether pid runs the shim binary. Seen through an overlay
// (a session's private /tmp holding the shims, as in tests) the file has
// the overlay's device and the same inode number and change time.
func (p *processes) isShim(pid int32) bool {
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/exe", pid), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Ino != p.shim.Ino || st.Ctim != p.shim.Ctim {
		return false
	}
	if st.Dev == p.shim.Dev {
		return true
	}
	var fs unix.Statfs_t
	return unix.Fstatfs(fd, &fs) == nil && fs.Type == unix.OVERLAYFS_SUPER_MAGIC
}

// procStatus is what /proc/PID/status says of a process's parent and real
// uid.
type procStatus struct {
	ppid int32
	uid  int
}

// statusOf reads pid's parent and real uid from /proc/PID/status.
func statusOf(pid int32) (procStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStatus{}, err
	}
	st := procStatus{uid: -1}
	havePPid := false
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PPid:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return procStatus{}, fmt.Errorf("/proc/%d/status: PPid: %w", pid, err)
			}
			st.ppid, havePPid = int32(n), true
		}
		if v, ok := strings.CutPrefix(l, "Uid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				st.uid, _ = strconv.Atoi(f[0])
			}
		}
	}
	if !havePPid {
		return procStatus{}, fmt.Errorf("/proc/%d/status has no PPid", pid)
	}
	return st, nil
}

// cgroupOf reads pid's cgroup v2 path from /proc/PID/cgroup.
func cgroupOf(pid int32) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "0::"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("/proc/%d/cgroup has no v2 line", pid)
}
