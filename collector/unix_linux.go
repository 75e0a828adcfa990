//go:build 386 || amd64 || arm64

package collector

import (
	"encoding/binary"
	"fmt"

	"github.com/sandtrail/sandtrail/policies/egress"
)

// unixKey returns the unix_allow entry of e for cgroup (0: every session).
func unixKey(cgroup uint64, e egress.UnixEntry) (netUnixKey, netUnixAllowVal) {
	var k netUnixKey
	var v netUnixAllowVal
	binary.NativeEndian.PutUint64(k.Data[:8], cgroup)
	n := copy(k.Data[8:], e.Name)
	switch {
	case e.Prefix:
	case e.Name[0] == 0:
		v.ExactLen = uint16(n)
	default:
		n++ // a pathname alone: its NUL too
	}
	k.Prefixlen = uint32(8+n) * 8
	return k, v
}

// allowUnix puts addrs (egress.ParseUnixEntry syntax) in the unix
// allowlist for cgroup, and returns the keys it wrote.
func (n *netCollector) allowUnix(cgroup uint64, addrs []string) ([]netUnixKey, error) {
	var keys []netUnixKey
	for _, a := range addrs {
		e, err := egress.ParseUnixEntry(a)
		if err != nil {
			return keys, fmt.Errorf("allowing unix socket addresses: %w", err)
		}
		k, v := unixKey(cgroup, e)
		if err := n.objs.UnixAllow.Put(k, v); err != nil {
			return keys, fmt.Errorf("allowing unix socket address %q: %w", a, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// writeUnix writes the policy's unix allowlist and the collector's own
// always-allowed addresses (WithUnixAllowed) for every session.
func (n *netCollector) writeUnix(t egress.Table, own []string) error {
	if _, err := n.allowUnix(0, own); err != nil {
		return err
	}
	_, err := n.allowUnix(0, t.UnixAllowed)
	return err
}
