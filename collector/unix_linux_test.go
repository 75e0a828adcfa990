//go:build 386 || amd64 || arm64

package collector

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/sandtrail/sandtrail/policies/egress"
	"github.com/sandtrail/sandtrail/record/event"
)

func TestUnixName(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string
	}{
		{"/run/x.sock", "/run/x.sock"},
		{"\x00/tmp/.X11-unix/X0", "@/tmp/.X11-unix/X0"},
		{"\x00a\x00b", `@a\x00b`},
		{"/tmp/\xff\\", `/tmp/\xff\x5c`},
		{"", ""},
	} {
		if got := UnixName([]byte(tt.in)); got != tt.want {
			t.Errorf("UnixName(%q) = %q, want %q", tt.in, got, tt.want)
		}
		// An allowlist entry written as the record writes it names the
		// same bytes.
		if tt.want == "" || tt.want == "@" {
			continue
		}
		e, err := egress.ParseUnixEntry(tt.want)
		if err != nil || string(e.Name) != tt.in {
			t.Errorf("ParseUnixEntry(%q) = %q, %v, want %q", tt.want, e.Name, err, tt.in)
		}
	}
}

func TestUnixKey(t *testing.T) {
	for _, tt := range []struct {
		entry     string
		prefixlen uint32
		exact     uint16
	}{
		{"/run/x.sock", (8 + 11 + 1) * 8, 0}, // the NUL too
		{"/run/", (8 + 5) * 8, 0},
		{"@name", (8 + 5) * 8, 5},
		{"@pre*", (8 + 4) * 8, 0},
	} {
		e, err := egress.ParseUnixEntry(tt.entry)
		if err != nil {
			t.Fatal(err)
		}
		k, v := unixKey(0, e)
		if k.Prefixlen != tt.prefixlen || v.ExactLen != tt.exact {
			t.Errorf("unixKey(%q) = prefixlen %d, exact_len %d, want %d, %d", tt.entry, k.Prefixlen, v.ExactLen, tt.prefixlen, tt.exact)
		}
	}
}

func TestDecodeUnixSocket(t *testing.T) {
	d := &decoder{}
	var u netUnixEvent
	u.Hdr.Kind, u.Hdr.Ts, u.Op, u.Verdict, u.SockType = uint32(processEventKindKIND_NET_UNIX), 1, uint8(netNetOpNET_OP_CONNECT), uint8(netNetVerdictNET_BLOCK), 1
	copy(u.Name[:], "\x00abc")
	u.Len = 4
	e, _, err := d.toEvent(asBytes(&u))
	if err != nil || e.Kind != event.KindNetConnect || e.Net.UnixPath != "@abc" || e.Net.Verdict != VerdictBlocked || e.Net.SockType != "stream" || e.Net.Reason == "" {
		t.Errorf("toEvent(unix connect) = %+v, %v, want net.connect @abc blocked stream with a reason", e, err)
	}
	u.Len = uint32(len(u.Name) + 1)
	if _, _, err := d.toEvent(asBytes(&u)); !errors.Is(err, errDecode) {
		t.Errorf("toEvent(unix record with len %d) error = %v, want errDecode", u.Len, err)
	}
	var s netSocketEvent
	s.Hdr.Kind, s.Hdr.Ts, s.Family, s.Type, s.Protocol, s.Ret = uint32(processEventKindKIND_NET_SOCKET), 1, 17, 3, 768, -1
	e, _, err = d.toEvent(asBytes(&s))
	if err != nil || e.Kind != event.KindNetSocket || e.Net.Family != "packet" || e.Net.SockType != "raw" || e.Net.Errno != "EPERM" || e.Net.Protocol != 768 {
		t.Errorf("toEvent(socket) = %+v, %v, want net.socket packet raw EPERM", e.Net, err)
	}
	s.Ret = -100000
	if _, _, err := d.toEvent(asBytes(&s)); !errors.Is(err, errDecode) {
		t.Errorf("toEvent(socket with result %d) error = %v, want errDecode", s.Ret, err)
	}
	if _, _, err := d.toEvent(asBytes(&s)[:unsafe.Sizeof(s)-1]); !errors.Is(err, errDecode) {
		t.Errorf("toEvent(short socket record) error = %v, want errDecode", err)
	}
}
