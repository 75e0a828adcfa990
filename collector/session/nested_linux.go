//go:build linux

package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"

	cgroups "github.com/sandtrail/sandtrail/kernel/cgroup"
	"github.com/sandtrail/sandtrail/record/event"
)

// nestedSeq numbers the nested cgroups, so that concurrent ones of one
// session have distinct names.
var nestedSeq atomic.Uint64

// NewNested creates a v2 cgroup nested in the session's, named
// <prefix>-<n>, for processes that the host runs in the session on the
// session's behalf: the apt broker's apt-get, dpkg and maintainer scripts.
// Started with SysProcAttr.CgroupFD = Nested.FD(), a process is born in
// it, so the collector records it and its descendants as the session's
// (it watches cgroups nested up to 8 levels beneath a session's), and
// Manager.Lookup maps the nested cgroup's id to the session, as the
// mirror's and the ingest socket's attribution of a peer need.
//
// Unlike Start, nothing else of the session is applied: the process keeps
// its own uid, mount namespace and seccomp state (none of the session's
// filter), and the session's v1 controller cgroups are not joined. So on a
// pure v2 host the session's memory, pids and cpu limits cover the nested
// cgroup (they are hierarchical), and on a hybrid host (v1 controllers)
// they do not. Pause, Terminate and the limit monitor's timeout reach it
// either way (cgroup.freeze and cgroup.kill act on nested cgroups, and the
// fallback kill walks them), and Cleanup removes it if it is still there.
//
// The session must be running (ErrState otherwise). Close removes the
// cgroup once its processes are gone.
func (s *Session) NewNested(prefix string) (*Nested, error) {
	if !idRE.MatchString(prefix) || len(prefix) > 32 {
		return nil, fmt.Errorf("%w: nested cgroup prefix %q", ErrInvalidSpec, event.Clip(prefix, 32))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateRunning || s.termReason != "" || s.cg.gone {
		return nil, fmt.Errorf("%w: nested cgroup: session is not running", ErrState)
	}
	dir := filepath.Join(s.cg.v2.Path, prefix+"-"+strconv.FormatUint(nestedSeq.Add(1), 10))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating nested cgroup: %w", err)
	}
	fd, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		syscall.Rmdir(dir)
		return nil, fmt.Errorf("opening nested cgroup: %w", err)
	}
	id, err := cgroups.FileID(fd)
	if err != nil {
		fd.Close()
		syscall.Rmdir(dir)
		return nil, fmt.Errorf("reading nested cgroup id: %w", err)
	}
	n := &Nested{s: s, path: dir, fd: fd, id: id}
	s.m.mu.Lock()
	s.m.byCgroup[id] = s
	s.nested = append(s.nested, id)
	s.m.mu.Unlock()
	return n, nil
}

// Nested is a v2 cgroup nested in a session's (Session.NewNested).
type Nested struct {
	s      *Session
	path   string
	fd     *os.File
	id     uint64
	closed bool
}

// FD is an open descriptor of the cgroup, for SysProcAttr.CgroupFD
// (UseCgroupFD); it stays valid until Close.
func (n *Nested) FD() int { return int(n.fd.Fd()) }

// ID is the cgroup's id, the inode number of its directory.
func (n *Nested) ID() uint64 { return n.id }

// Path is the cgroup's directory.
func (n *Nested) Path() string { return n.path }

// Close closes the descriptor and removes the cgroup. While processes
// still run in it (a daemon a maintainer script started, say) it returns
// an error and leaves the cgroup, still the session's, for the session's
// end to kill and Cleanup to remove. A second Close does nothing.
func (n *Nested) Close() error {
	if n.closed {
		return nil
	}
	n.closed = true
	n.fd.Close()
	err := syscall.Rmdir(n.path)
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("removing nested cgroup %s: %w", n.path, err)
	}
	m := n.s.m
	m.mu.Lock()
	if m.byCgroup[n.id] == n.s {
		delete(m.byCgroup, n.id)
	}
	m.mu.Unlock()
	return nil
}
