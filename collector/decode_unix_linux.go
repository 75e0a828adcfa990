//go:build 386 || amd64 || arm64

package collector

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/record/event"
)

// unixReason is the reason of a unix connect or send that the policy
// refused or flagged.
const unixReason = "unix socket address not in egress.unix.allowed (egress.unix.default)"

// rawReason is the reason of a socket that egress.raw_sockets refused.
const rawReason = "raw and packet sockets refused (egress.raw_sockets: block)"

// unix1 converts a unix connect or send record (struct unix_event) to a
// net.connect or net.send event with proto unix.
func (d *decoder) unix1(raw []byte) (*event.Event, *oomVictim, error) {
	var r netUnixEvent
	if err := load(&r, raw); err != nil {
		return nil, nil, err
	}
	if int(r.Len) > len(r.Name) {
		return nil, nil, fmt.Errorf("%w: unix record with a name of %d bytes", errDecode, r.Len)
	}
	n := &event.Net{Proto: "unix", SockType: sockTypeName(uint32(r.SockType))}
	kind := connectOrSend(netNetOp(r.Op), r.Count, n)
	if kind == "" {
		return nil, nil, fmt.Errorf("%w: unix record with op %d", errDecode, r.Op)
	}
	v, err := verdictName(r.Verdict)
	if err != nil {
		return nil, nil, err
	}
	n.Verdict = v
	if v != VerdictAllowed {
		n.Reason = unixReason
	}
	n.UnixPath = UnixName(r.Name[:r.Len])
	e := d.envelope(kind, (*processEventHeader)(&r.Hdr))
	e.Proc = &event.Proc{Pid: int32(r.Hdr.Pid), UID: event.U32(r.Uid), Comm: cString(r.Hdr.Comm[:]), CgroupID: r.Hdr.CgroupId}
	e.Net = n
	return e, nil, nil
}

// socket1 converts a socket(2) record (struct socket_event) to a
// net.socket event.
func (d *decoder) socket1(raw []byte) (*event.Event, *oomVictim, error) {
	var r netSocketEvent
	if err := load(&r, raw); err != nil {
		return nil, nil, err
	}
	n := &event.Net{Op: "socket", Family: familyName(r.Family), SockType: sockTypeName(r.Type), Protocol: r.Protocol}
	v, err := verdictName(r.Verdict)
	if err != nil {
		return nil, nil, err
	}
	n.Verdict = v
	if v == VerdictBlocked {
		n.Reason = rawReason
	}
	if r.Ret < 0 {
		if r.Ret < -4095 {
			return nil, nil, fmt.Errorf("%w: socket record with result %d", errDecode, r.Ret)
		}
		n.Errno = unix.ErrnoName(unix.Errno(-r.Ret))
		if n.Errno == "" {
			n.Errno = "errno " + strconv.FormatInt(-r.Ret, 10)
		}
	}
	e := d.envelope(event.KindNetSocket, (*processEventHeader)(&r.Hdr))
	e.Proc = &event.Proc{Pid: int32(r.Hdr.Pid), UID: event.U32(r.Uid), Comm: cString(r.Hdr.Comm[:]), CgroupID: r.Hdr.CgroupId}
	e.Net = n
	return e, nil, nil
}

// verdictName names an enum net_verdict.
func verdictName(v uint8) (string, error) {
	switch netNetVerdict(v) {
	case netNetVerdictNET_ALLOW:
		return VerdictAllowed, nil
	case netNetVerdictNET_BLOCK:
		return VerdictBlocked, nil
	case netNetVerdictNET_FLAG:
		return VerdictFlagged, nil
	}
	return "", fmt.Errorf("%w: net record with verdict %d", errDecode, v)
}

// UnixName writes the sun_path bytes of a unix socket address as
// event.Net.UnixPath does: a pathname as it is, an abstract name (a leading
// NUL) as "@" and the name, with bytes outside printable ASCII and "\" as
// \xNN. The empty address (an unnamed socket) is "".
func UnixName(b []byte) string {
	var sb strings.Builder
	if len(b) > 0 && b[0] == 0 {
		sb.WriteByte('@')
		b = b[1:]
	}
	for _, c := range b {
		if c < 0x20 || c > 0x7e || c == '\\' {
			fmt.Fprintf(&sb, `\x%02x`, c)
			continue
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// familyName names a socket family for event.Net.Family.
func familyName(f uint32) string {
	switch f {
	case unix.AF_UNIX:
		return "unix"
	case unix.AF_INET:
		return "inet"
	case unix.AF_INET6:
		return "inet6"
	case unix.AF_NETLINK:
		return "netlink"
	case unix.AF_PACKET:
		return "packet"
	case unix.AF_ALG:
		return "alg"
	case unix.AF_VSOCK:
		return "vsock"
	case unix.AF_KEY:
		return "key"
	case unix.AF_XDP:
		return "xdp"
	case unix.AF_BLUETOOTH:
		return "bluetooth"
	case unix.AF_CAN:
		return "can"
	case unix.AF_TIPC:
		return "tipc"
	case unix.AF_RDS:
		return "rds"
	}
	return "af_" + strconv.FormatUint(uint64(f), 10)
}

// sockTypeName names a socket type for event.Net.SockType.
func sockTypeName(t uint32) string {
	switch t {
	case unix.SOCK_STREAM:
		return "stream"
	case unix.SOCK_DGRAM:
		return "dgram"
	case unix.SOCK_RAW:
		return "raw"
	case unix.SOCK_RDM:
		return "rdm"
	case unix.SOCK_SEQPACKET:
		return "seqpacket"
	case unix.SOCK_DCCP:
		return "dccp"
	case unix.SOCK_PACKET:
		return "packet"
	}
	return "type_" + strconv.FormatUint(uint64(t), 10)
}
