//go:build !linux

package peercred

import "net"

// Read returns ErrNotSupported.
func Read(*net.UnixConn, bool) (Cred, error) { return Cred{Pidfd: -1}, ErrNotSupported }
