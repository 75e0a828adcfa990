package server

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/sandtrail/sandtrail/record/ingest"
)

// DefaultMaxConnsPerPeer is how many connections one peer may hold open by
// default (see WithMaxConnsPerPeer).
const DefaultMaxConnsPerPeer = 32

// busyWarnEvery is the least time between two log lines about connections
// turned away at a cap: a peer must not flood the log by reconnecting.
const busyWarnEvery = 10 * time.Second

// Why a connection was turned away.
type overCap int

const (
	capNone   overCap = iota // admitted
	capTotal                 // the cap on all connections
	capShared                // the share of peers other than the orchestrator
	capPeer                  // the peer's own cap
)

// connCaps counts admitted connections: in total, of unprivileged peers and
// per peer. A privileged peer (root outside every session) is counted only
// in the total; everyone else shares max minus reserve connections, so that
// the reserve is always left for the orchestrator, and each peer may hold at
// most perPeer of them.
type connCaps struct {
	max, reserve, perPeer int

	mu     sync.Mutex
	total  int
	shared int
	byPeer map[string]int
}

func newConnCaps(maxConns, perPeer int) *connCaps {
	reserve := 0
	if maxConns > 1 {
		reserve = max(maxConns/8, 1)
	}
	return &connCaps{max: maxConns, reserve: reserve, perPeer: perPeer, byPeer: make(map[string]int)}
}

// acquire counts a connection of the peer key, unless that exceeds a cap.
// It returns which cap refused it and how many connections the peer holds.
func (c *connCaps) acquire(key string, privileged bool) (overCap, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.byPeer[key]
	switch {
	case c.total >= c.max:
		return capTotal, n
	case privileged:
		c.total++
		return capNone, 0
	case c.perPeer > 0 && n >= c.perPeer:
		return capPeer, n
	case c.shared >= c.max-c.reserve:
		return capShared, n
	}
	c.total++
	c.shared++
	c.byPeer[key] = n + 1
	return capNone, n + 1
}

// release uncounts a connection that acquire admitted.
func (c *connCaps) release(key string, privileged bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if privileged {
		return
	}
	c.shared--
	if n := c.byPeer[key] - 1; n > 0 {
		c.byPeer[key] = n
	} else {
		delete(c.byPeer, key)
	}
}

// peers returns how many peers hold connections (tests).
func (c *connCaps) peers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byPeer)
}

// connKey is the peer a connection is counted under: its session for a
// peer in one (however many processes and cgroups it uses), otherwise its
// uid. Root outside every session, the orchestrator, is privileged. A peer
// that cannot be attributed is counted under its uid, unprivileged.
func (s *Server) connKey(p *peer) (key string, privileged bool) {
	a, err := s.attribute(p)
	switch {
	case err == nil && a.session != "":
		return "session " + a.session, false
	case err == nil && a.uid == 0:
		return "", true
	}
	return "uid " + strconv.FormatUint(uint64(p.UID), 10), false
}

// admitConn counts c against the caps on connections. Over a cap it
// answers busy and returns nil; otherwise it returns the function that
// uncounts c, to call when c closes.
func (s *Server) admitConn(c *net.UnixConn, p *peer) func() {
	key, privileged := s.connKey(p)
	over, n := s.caps.acquire(key, privileged)
	if over == capNone {
		return func() { s.caps.release(key, privileged) }
	}
	s.busy.Add(1)
	msg := "too many connections"
	switch over {
	case capPeer:
		s.peerBusy.Add(1)
		msg = fmt.Sprintf("too many connections from this peer (%d)", s.caps.perPeer)
		s.warnBusy("connection refused: peer holds its cap of connections", "peer", key, "pid", p.Pid, "uid", p.UID,
			"open", n, "cap", s.caps.perPeer, "refused_at_peer_cap", s.peerBusy.Load())
	case capShared:
		s.warnBusy("connection refused: unprivileged peers hold their share of connections", "peer", key, "pid", p.Pid,
			"uid", p.UID, "share", s.caps.max-s.caps.reserve, "reserved_for_root", s.caps.reserve)
	case capTotal:
		s.warnBusy("connection refused: connection cap reached", "peer", key, "pid", p.Pid, "uid", p.UID, "cap", s.caps.max)
	}
	s.reply(c, &ingest.Reply{Code: ingest.CodeBusy, Error: msg})
	return nil
}

// warnBusy logs a refusal at a cap, at most once every busyWarnEvery; the
// counters (Stats) count every one.
func (s *Server) warnBusy(msg string, args ...any) {
	now := time.Now().UnixNano()
	last := s.lastBusyWarn.Load()
	if last != 0 && now-last < int64(busyWarnEvery) || !s.lastBusyWarn.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn(msg, args...)
}
