//go:build !linux

package server

import (
	"errors"
	"net"

	"github.com/sandtrail/sandtrail/kernel/cgroup"
)

// ErrNotSupported is returned on systems without SO_PEERCRED and cgroup v2.
var ErrNotSupported = errors.New("server: peer attribution needs linux")

var errPeerGone = errors.New("server: peer process has exited")

type peer struct {
	pid    int32
	uid    uint32
	warned bool
}

func newPeer(*net.UnixConn, bool) (*peer, error) { return nil, ErrNotSupported }

func (p *peer) close() {}

func (p *peer) cgroupPath() (string, error) { return "", ErrNotSupported }

func (p *peer) cgroupIDs(cgroup.Mount, string) ([]uint64, error) { return nil, ErrNotSupported }
