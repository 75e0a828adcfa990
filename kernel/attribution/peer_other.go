//go:build !linux

package attribution

import (
	"errors"
	"net"
)

// ErrNotSupported is returned on systems without SO_PEERCRED and cgroup v2.
var ErrNotSupported = errors.New("attribution: peer attribution needs linux")

// Peer is a unix connection's peer (see the Linux build).
type Peer struct {
	Pid int32
	UID uint32
}

// Open returns ErrNotSupported.
func (a *Attributor) Open(*net.UnixConn) (*Peer, error) { return nil, ErrNotSupported }

// Close does nothing.
func (p *Peer) Close() {}

// Attribute returns ErrNotSupported.
func (a *Attributor) Attribute(p *Peer) (Attribution, error) {
	return Attribution{}, ErrNotSupported
}

// Unix returns ErrNotSupported.
func (a *Attributor) Unix(*net.UnixConn) (Attribution, error) { return Attribution{}, ErrNotSupported }
