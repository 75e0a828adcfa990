//go:build !linux

package peercred

import "net/netip"

// SocketCgroup returns ErrNotSupported.
func SocketCgroup(string, netip.AddrPort, netip.AddrPort) (uint64, error) { return 0, ErrNotSupported }

// SocketOf returns ErrNotSupported.
func SocketOf(string, netip.AddrPort, netip.AddrPort) (Socket, error) {
	return Socket{}, ErrNotSupported
}
