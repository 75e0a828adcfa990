// Package netns makes network namespaces for the tests that dial or send
// to addresses off this machine. In a namespace that New makes, lo is up
// and the IPv4 and IPv6 default routes lead into one end of a veth pair
// whose other end stays in the same namespace, so a packet to any address
// that is not local is routed there and dropped inside the host: nothing a
// test sends can leave through the machine's own interfaces.
//
// A process started in the namespace stays in its parent's cgroup, so the
// collector's cgroup BPF hooks still see it: cgroup BPF belongs to the
// cgroup, not to the namespace.
//
// The dialers of the tests call Check first and refuse to run outside such
// a namespace, so a test that forgets to use one fails loudly instead of
// sending packets out. The rule is in test/README.md.
package netns

import "errors"

// The veth pair that the default routes lead into. Both ends stay in the
// namespace.
const (
	SinkLink = "st-sink0"
	SinkPeer = "st-sink1"
)

// ErrNotSupported is returned where network namespaces do not exist.
var ErrNotSupported = errors.New("netns: not supported on this OS")
