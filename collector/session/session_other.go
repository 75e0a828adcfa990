//go:build !linux

package session

import (
	"context"
	"os"
	"os/exec"

	"github.com/sandtrail/sandtrail/collector/session/seccomp"
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

func readLayout() (*Layout, error)                             { return nil, ErrNotSupported }
func newCgroup(*Layout, string, event.Limits) (*cgroup, error) { return nil, ErrNotSupported }
func (c *cgroup) start(*exec.Cmd, *seccomp.Filter) error       { return ErrNotSupported }
func (c *cgroup) checkMember(int) error                        { return ErrNotSupported }
func (c *cgroup) freeze(context.Context, bool) error           { return ErrNotSupported }
func (c *cgroup) kill(context.Context) error                   { return ErrNotSupported }
func (c *cgroup) closeAndRemove(context.Context) error         { return ErrNotSupported }
func (c *cgroup) readStats() stats                             { return stats{-1, -1, -1, -1, -1} }
func (c *cgroup) memRel() string                               { return "" }
func cpuQuota(cpus float64) int64                              { return int64(cpus * 100000) }
func openKmsg() (*kmsg, error)                                 { return nil, ErrNotSupported }
func (k *kmsg) oomKills() []OOMKill                            { return nil }
func (k *kmsg) close()                                         {}
func diskUsage(string, int) (int64, bool, error)               { return 0, false, ErrNotSupported }
func openNoFollow(p string) (*os.File, error)                  { return os.Open(p) }
