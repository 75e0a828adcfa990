package attribution

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

// Peer is the process at the other end of a unix connection, as the kernel
// named it when it connected (Open). A server holds one per connection and
// attributes it (Attribute) each time it acts on the peer's behalf.
type Peer struct {
	Pid int32
	UID uint32

	pidfd int    // -1 when the kernel has no SO_PEERPIDFD
	start uint64 // process start time, used when there is no pidfd

	// The cgroup id chain of the last cgroup path seen, nearest first.
	cachePath string
	cacheIDs  []uint64
}

// Open reads the peer credentials of c, and a pidfd of the peer where the
// kernel has one (its start time otherwise). It returns ErrPeerGone when
// the peer has exited already. The caller Closes the peer.
func (a *Attributor) Open(c *net.UnixConn) (*Peer, error) {
	cr, err := peercred.Read(c, !a.noPidfd)
	if err != nil {
		return nil, err
	}
	p := &Peer{Pid: cr.Pid, UID: cr.UID, pidfd: cr.Pidfd}
	if p.pidfd < 0 {
		st, err := startTime(p.Pid)
		if err != nil {
			return nil, err
		}
		p.start = st
	}
	return p, nil
}

// Close releases the peer's pidfd.
func (p *Peer) Close() {
	if p.pidfd >= 0 {
		_ = unix.Close(p.pidfd)
		p.pidfd = -1
	}
}

// Attribute is the one attribution step: p's pid → its v2 cgroup now → the
// session of that cgroup or of its nearest registered ancestor. It checks,
// after reading the cgroup, that the pid still names the process that
// connected, and returns ErrPeerGone when it does not: a recycled pid never
// lends its cgroup to a connection. Without a v2 hierarchy it makes the
// same check and returns an Attribution with no cgroup and no session.
func (a *Attributor) Attribute(p *Peer) (Attribution, error) {
	at := Attribution{Pid: p.Pid, UID: p.UID}
	cg, err := p.cgroupPath()
	if a.mountErr != nil || errors.Is(err, cgroup.ErrNoV2) {
		if err != nil && !errors.Is(err, cgroup.ErrNoV2) {
			return at, err
		}
		return at, nil
	}
	if err != nil {
		return at, err
	}
	ids, err := p.cgroupIDs(a.mount, cg)
	if err != nil {
		return at, err
	}
	at.CgroupID = ids[0]
	at.Session = a.lookup(ids)
	return at, nil
}

// Unix opens c's peer, attributes it once and closes it: for a server that
// acts once per connection, right after the peer's request arrived.
func (a *Attributor) Unix(c *net.UnixConn) (Attribution, error) {
	p, err := a.Open(c)
	if err != nil {
		return Attribution{}, err
	}
	defer p.Close()
	return a.Attribute(p)
}

// alive reports whether the process that connected is still the one that
// holds p.Pid.
func (p *Peer) alive() error {
	if p.pidfd >= 0 {
		err := unix.PidfdSendSignal(p.pidfd, 0, nil, 0)
		if errors.Is(err, unix.ESRCH) {
			return ErrPeerGone
		}
		if err != nil {
			return fmt.Errorf("checking peer pidfd: %w", err)
		}
		return nil
	}
	st, err := startTime(p.Pid)
	if err != nil || st != p.start {
		return ErrPeerGone
	}
	return nil
}

// cgroupPath reads the peer's current v2 cgroup path. It checks afterwards
// that the pid still names the process that connected, so a recycled pid
// cannot lend its cgroup to a connection.
func (p *Peer) cgroupPath() (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(p.Pid)) + "/cgroup")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return "", ErrPeerGone
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
func (p *Peer) cgroupIDs(m cgroup.Mount, cg string) ([]uint64, error) {
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
		return 0, ErrPeerGone
	}
	return parseStartTime(pid, b)
}

// parseStartTime reads field 22 (the start time) of a /proc/<pid>/stat.
func parseStartTime(pid int32, b []byte) (uint64, error) {
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
