//go:build !linux

package session

import (
	"context"
	"errors"
	"os"
	"os/exec"

	"github.com/sandtrail/sandtrail/kernel/seccomp"
	"github.com/sandtrail/sandtrail/record/event"
)

// Off Linux there are no cgroups: NewManager fails with ErrNotSupported,
// and these stand-ins are never reached.

type cgroup struct {
	id uint64
	v2 Dir
	fd *os.File
}

type stats struct{ oomKill, memPeak, pidsEvents, pidsCurrent, throttledUsec int64 }

type kmsg struct{}

type sessionFS struct{ mnt, passwd string }

func (s *Session) saveState() error   { return ErrNotSupported }
func (s *Session) removeState() error { return nil }
func (f *sessionFS) mounted() bool    { return false }

const stateFile = "session.json"

// Abandoned finds the sessions a dead manager left behind; there are none
// off Linux.
func (m *Manager) Abandoned(context.Context) ([]*Session, error) { return nil, ErrNotSupported }

// ErrNoSpace is Linux's; it is never returned here.
var ErrNoSpace = errors.New("session: not enough free space to preserve the workdir")

func newSessionFS(string, string, int64, []string) (*sessionFS, error) { return nil, ErrNotSupported }
func (f *sessionFS) enter([]string) error                              { return ErrNotSupported }
func unshareMounts() error                                             { return ErrNotSupported }
func (f *sessionFS) usage() (int64, int64, error)                      { return 0, 0, ErrNotSupported }
func (f *sessionFS) unmountWork() error                                { return ErrNotSupported }
func (f *sessionFS) unmount() error                                    { return ErrNotSupported }
func roomFor(string, int64) error                                      { return ErrNotSupported }
func copyTree(context.Context, string, string, *uint32) error          { return ErrNotSupported }

type ownUID struct{ uid uint32 }

func (o *ownUID) release()                     {}
func (m *Manager) allocUID() (*ownUID, error)  { return nil, ErrNotSupported }
func writePasswd(string, *Agent, uint32) error { return ErrNotSupported }

func readLayout() (*Layout, error)                                     { return nil, ErrNotSupported }
func newCgroup(*Layout, string, event.Limits) (*cgroup, error)         { return nil, ErrNotSupported }
func (c *cgroup) start(*exec.Cmd, func() error, *seccomp.Filter) error { return ErrNotSupported }
func (c *cgroup) checkMember(int) error                                { return ErrNotSupported }
func (c *cgroup) freeze(context.Context, bool) error                   { return ErrNotSupported }
func (c *cgroup) kill(context.Context) error                           { return ErrNotSupported }
func (c *cgroup) closeAndRemove(context.Context) error                 { return ErrNotSupported }
func (c *cgroup) readStats() stats                                     { return stats{-1, -1, -1, -1, -1} }
func (c *cgroup) memRel() string                                       { return "" }
func cpuQuota(cpus float64) int64                                      { return int64(cpus * 100000) }
func openKmsg() (*kmsg, error)                                         { return nil, ErrNotSupported }
func (k *kmsg) oomKills() []OOMKill                                    { return nil }
func (k *kmsg) close()                                                 {}
func openNoFollow(p string) (*os.File, error)                          { return os.Open(p) }

// Nested is Linux's; NewNested fails with ErrNotSupported here.
type Nested struct{}

// NewNested fails with ErrNotSupported: there are no cgroups off Linux.
func (s *Session) NewNested(string) (*Nested, error) { return nil, ErrNotSupported }

// FD is never reached off Linux.
func (n *Nested) FD() int { return -1 }

// ID is never reached off Linux.
func (n *Nested) ID() uint64 { return 0 }

// Path is never reached off Linux.
func (n *Nested) Path() string { return "" }

// Close does nothing off Linux.
func (n *Nested) Close() error { return nil }
