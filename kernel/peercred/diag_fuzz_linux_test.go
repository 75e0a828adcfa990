package peercred

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzParseDiagFields: a well-formed sock_diag answer, with any attributes
// of other types before the cgroup id (any lengths, padded as netlink pads
// them) and any bytes after the message, gives back exactly the socket's
// cookie, owner and cgroup: the mirror names a fetch's session and process
// by them.
func FuzzParseDiagFields(f *testing.F) {
	f.Add(uint64(0x0123456789abcdef), uint32(65534), uint64(4711), []byte{}, []byte{})
	f.Add(uint64(1), uint32(0x5a000001), uint64(1<<40), []byte{5, 1, 2, 3, 4, 5, 0, 7}, []byte{0xff, 0xff})
	f.Add(uint64(0), uint32(0), uint64(0), []byte{0, 1, 9}, []byte{})
	ne := binary.NativeEndian
	f.Fuzz(func(t *testing.T, cookie uint64, uid uint32, cg uint64, others, trailer []byte) {
		b := make([]byte, nlmsgHdrLen+inetDiagMsgLen)
		ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
		body := b[nlmsgHdrLen:]
		ne.PutUint32(body[44:], uint32(cookie))
		ne.PutUint32(body[48:], uint32(cookie>>32))
		ne.PutUint32(body[64:], uid)
		// others: each attribute is a length byte (its payload's), a type
		// byte and that many payload bytes, while they last.
		for len(others) >= 2 && len(b) < 1<<14 {
			n, typ := int(others[0]), uint16(others[1])
			if typ == inetDiagCgroupID {
				typ++
			}
			others = others[2:]
			n = min(n, len(others))
			a := make([]byte, 4+n, (4+n+3)&^3)
			ne.PutUint16(a[0:], uint16(4+n))
			ne.PutUint16(a[2:], typ)
			copy(a[4:], others[:n])
			others = others[n:]
			b = append(b, a[:cap(a)]...)
		}
		a := make([]byte, 12)
		ne.PutUint16(a[0:], 12)
		ne.PutUint16(a[2:], inetDiagCgroupID)
		ne.PutUint64(a[4:], cg)
		b = append(b, a...)
		ne.PutUint32(b[0:], uint32(len(b)))
		b = append(b, trailer...)
		got, err := parseDiag(b)
		want := Socket{Cookie: cookie, UID: uid, Cgroup: cg}
		if err != nil || got != want {
			t.Fatalf("parseDiag(%x) = %+v, %v, want %+v", b, got, err, want)
		}
	})
}
