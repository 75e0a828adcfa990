package server

import "github.com/sandtrail/sandtrail/kernel/attribution"

// peer is the process at the other end of a connection, as the kernel
// named it when it connected (attribution.Peer), attributed again for each
// batch.
type peer struct {
	*attribution.Peer
	warned bool // a refusal was logged for this connection
}

// sender is who sent a batch, as the kernel says (attribution.Attribution).
type sender struct {
	pid      int32
	uid      uint32
	cgroupID uint64
	session  string // empty outside every session
}
