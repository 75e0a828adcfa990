//go:build !linux

package dns

import (
	"errors"
	"net/netip"
)

var errNoSocket = errors.New("dns: no socket for the query's addresses")

// socketCgroup is Linux only.
func socketCgroup(string, netip.AddrPort, netip.AddrPort) (uint64, error) {
	return 0, errors.ErrUnsupported
}
