//go:build 386 || amd64 || arm64

package collector

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/policies/egress"
	"github.com/sandtrail/sandtrail/record/event"
)

// Verdicts written in event.Net.Verdict.
const (
	VerdictAllowed = "allowed"
	VerdictBlocked = "blocked"
	VerdictFlagged = "flagged"
)

// net1 converts a network record (struct net_event) to a net.* event.
func (d *decoder) net1(kind processEventKind, raw []byte) (*event.Event, *oomVictim, error) {
	var r netNetEvent
	if err := load(&r, raw); err != nil {
		return nil, nil, err
	}
	var h processEventHeader
	if err := load(&h, raw); err != nil {
		return nil, nil, err
	}
	proto, err := netProto(r.Proto)
	if err != nil {
		return nil, nil, err
	}
	dst, err := netAddr(&r.Dst)
	if err != nil {
		return nil, nil, err
	}
	src, err := netAddr(&r.Src)
	if err != nil {
		return nil, nil, err
	}
	n := &event.Net{Proto: proto}
	name, err := netOp(kind, &r, n)
	if err != nil {
		return nil, nil, err
	}
	if src.IsValid() {
		n.SrcIP, n.SrcPort = src.String(), r.Src.Port
	}
	if dst.IsValid() && kind != processEventKindKIND_NET_LISTEN {
		n.DstIP, n.DstPort = dst.String(), r.Dst.Port
		if kind == processEventKindKIND_NET_CONNECT {
			// A connect or send to 0.0.0.0 or :: names the loopback
			// address the kernel connects it to, as its net.close
			// does; the reason of a verdict names both.
			n.DstIP = egress.Reached(dst).String()
		}
		// A connect or send names the domain only when the kernel knew
		// it at the decision: one learned later must not explain it.
		known := kind != processEventKindKIND_NET_CONNECT || netNetFlags(r.Flags)&netNetFlagsNET_DOMAIN_KNOWN != 0
		if d.net != nil && known {
			n.Domain = d.net.domain(dst)
		}
	}
	if kind == processEventKindKIND_NET_CONNECT {
		if err := d.netVerdict(&r, n, dst); err != nil {
			return nil, nil, err
		}
	}
	e := d.envelope(name, &h)
	e.Proc = &event.Proc{
		Pid:      int32(h.Pid),
		UID:      event.U32(r.Uid),
		Comm:     cString(h.Comm[:]),
		CgroupID: h.CgroupId,
	}
	e.Net = n
	return e, nil, nil
}

// netProto names the IP protocol of a net record: tcp or udp.
func netProto(p uint8) (string, error) {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp", nil
	case unix.IPPROTO_UDP:
		return "udp", nil
	}
	return "", fmt.Errorf("%w: net record with protocol %d", errDecode, p)
}

// netOp sets n.Op, and the fields that only some operations have, from the
// record r of kind; it returns the event kind.
func netOp(kind processEventKind, r *netNetEvent, n *event.Net) (string, error) {
	var name string
	switch kind {
	case processEventKindKIND_NET_CONNECT:
		if name = connectOrSend(netNetOp(r.Op), r.Count, n); name == "" {
			return "", fmt.Errorf("%w: net record with op %d", errDecode, r.Op)
		}
	case processEventKindKIND_NET_CLOSE:
		name, n.Op = event.KindNetClose, "close"
		n.BytesOut, n.BytesIn = r.BytesOut, r.BytesIn
		if r.Start != 0 && r.Hdr.Ts > r.Start {
			n.DurationMS = int64((r.Hdr.Ts - r.Start) / 1e6)
		}
	case processEventKindKIND_NET_LISTEN:
		name, n.Op = event.KindNetListen, "listen"
	case processEventKindKIND_NET_ACCEPT:
		name, n.Op = event.KindNetAccept, "accept"
	}
	return name, nil
}

// connectOrSend sets n's op for a connect or send record of op, with the
// merged count of a send, and returns the event kind; "" for another op.
// It is the one reading of the op for inet and unix records.
func connectOrSend(op netNetOp, count uint64, n *event.Net) string {
	switch op {
	case netNetOpNET_OP_CONNECT:
		n.Op = "connect"
		return event.KindNetConnect
	case netNetOpNET_OP_SEND:
		n.Op = "send"
		if count > 1 {
			n.Count = count
		}
		return event.KindNetSend
	}
	return ""
}

// netVerdict sets the verdict of a connect or send record r, and the
// reason for one that was redirected, blocked or flagged.
func (d *decoder) netVerdict(r *netNetEvent, n *event.Net, dst netip.Addr) error {
	switch netNetVerdict(r.Verdict) {
	case netNetVerdictNET_ALLOW:
		n.Verdict = VerdictAllowed
	case netNetVerdictNET_BLOCK:
		n.Verdict = VerdictBlocked
	case netNetVerdictNET_FLAG:
		n.Verdict = VerdictFlagged
	default:
		return fmt.Errorf("%w: net record with verdict %d", errDecode, r.Verdict)
	}
	switch {
	case netNetFlags(r.Flags)&netNetFlagsNET_REDIRECTED != 0:
		n.Reason = "port 53: redirected to the session's DNS proxy"
	case n.Verdict != VerdictAllowed && d.net != nil:
		n.Reason = d.net.reason(n.Domain, dst, n.DstPort, n.Proto)
	}
	return nil
}

// netAddr returns the address of a struct net_addr; invalid for an unset
// one (family 0).
func netAddr(a *netNetAddr) (netip.Addr, error) {
	switch a.Family {
	case 0:
		return netip.Addr{}, nil
	case unix.AF_INET, unix.AF_INET6:
		return wordsAddr(a), nil
	}
	return netip.Addr{}, fmt.Errorf("%w: net address of family %d", errDecode, a.Family)
}
