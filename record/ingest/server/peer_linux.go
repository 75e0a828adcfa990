package server

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/kernel/cgroup"
	"github.com/sandtrail/sandtrail/kernel/peercred"
)

// peer is the kernel's account of the process at the other end of a
// connection, taken when it connected.
type peer struct {
	pid   int32
	uid   uint32
	pidfd int    // -1 when the kernel has no SO_PEERPIDFD
	start uint64 // process start time, used when there is no pidfd

	warned bool // a refusal was logged for this connection

	// The cgroup id chain of the last cgroup path seen, nearest first.
	cachePath string
	cacheIDs  []uint64
}

// errPeerGone is returned when the connecting process has exited, so its
// pid can no longer be trusted to name it.
var errPeerGone = errors.New("server: peer process has exited")

// newPeer reads the peer credentials of a unix connection. Without
// usePidfd (a test hook) it behaves as on kernels without SO_PEERPIDFD.
func newPeer(c *net.UnixConn, usePidfd bool) (*peer, error) {
	cr, err := peercred.Read(c, usePidfd)
	if err != nil {
		return nil, err
	}
	p := &peer{pid: cr.Pid, uid: cr.UID, pidfd: cr.Pidfd}
	if p.pidfd < 0 {
		st, err := startTime(p.pid)
		if err != nil {
			return nil, err
		}
		p.start = st
	}
	return p, nil
}

func (p *peer) close() {
	if p.pidfd >= 0 {
		_ = unix.Close(p.pidfd)
		p.pidfd = -1
	}
}

// alive reports whether the process that connected is still the one that
// holds p.pid.
func (p *peer) alive() error {
	if p.pidfd >= 0 {
		err := unix.PidfdSendSignal(p.pidfd, 0, nil, 0)
		if errors.Is(err, unix.ESRCH) {
			return errPeerGone
		}
		if err != nil {
			return fmt.Errorf("checking peer pidfd: %w", err)
		}
		return nil
	}
	st, err := startTime(p.pid)
	if err != nil || st != p.start {
		return errPeerGone
	}
	return nil
}

// cgroupPath reads the peer's current v2 cgroup path. It checks afterwards
// that the pid still names the process that connected, so a recycled pid
// cannot lend its cgroup to a connection.
func (p *peer) cgroupPath() (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(p.pid)) + "/cgroup")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return "", errPeerGone
		}
		return "", fmt.Errorf("reading peer cgroup: %w", err)
	}
	if err := p.alive(); err != nil {
		return "", err
	}
	return cgroup.V2Path(b)
}

// cgroupIDs returns the ids of the cgroup at cg and of its ancestors, nearest
// first. The id of a cgroup is the inode number of its directory, which is
// what bpf_get_current_cgroup_id returns.
func (p *peer) cgroupIDs(m cgroup.Mount, cg string) ([]uint64, error) {
	if cg == p.cachePath && p.cacheIDs != nil {
		return p.cacheIDs, nil
	}
	ids, err := m.AncestorIDs(cg)
	if err != nil {
		return nil, err
	}
	p.cachePath, p.cacheIDs = cg, ids
	return ids, nil
}

// startTime returns field 22 of /proc/<pid>/stat.
func startTime(pid int32) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/stat")
	if err != nil {
		return 0, errPeerGone
	}
	// comm may contain spaces and parens; fields resume after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("parsing /proc/%d/stat: no comm", pid)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	st, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat start time: %w", pid, err)
	}
	return st, nil
}
