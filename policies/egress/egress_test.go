package egress

import (
	"net/netip"
	"testing"
)

func TestPortRangeMatch(t *testing.T) {
	for _, tt := range []struct {
		name  string
		r     PortRange
		port  uint16
		proto string
		want  bool
	}{
		{"inside, any proto", PortRange{Lo: 8000, Hi: 8100}, 8050, "udp", true},
		{"low end", PortRange{Lo: 8000, Hi: 8100}, 8000, "tcp", true},
		{"high end", PortRange{Lo: 8000, Hi: 8100}, 8100, "tcp", true},
		{"below", PortRange{Lo: 8000, Hi: 8100}, 7999, "tcp", false},
		{"above", PortRange{Lo: 8000, Hi: 8100}, 8101, "tcp", false},
		{"proto matches", PortRange{Lo: 53, Hi: 53, Proto: "udp"}, 53, "udp", true},
		{"proto in upper case", PortRange{Lo: 53, Hi: 53, Proto: "udp"}, 53, "UDP", true},
		{"other proto", PortRange{Lo: 53, Hi: 53, Proto: "udp"}, 53, "tcp", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Match(tt.port, tt.proto); got != tt.want {
				t.Errorf("%+v.Match(%d, %q) = %v, want %v", tt.r, tt.port, tt.proto, got, tt.want)
			}
		})
	}
}

func TestVerdictPast(t *testing.T) {
	for _, tt := range []struct {
		v    Verdict
		want string
	}{
		{Allow, "allowed"},
		{Flag, "flagged"},
		{Block, "blocked"},
		{"", "blocked"}, // anything unexpected: fail closed.
	} {
		if got := tt.v.Past(); got != tt.want {
			t.Errorf("Verdict(%q).Past() = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestLoopback(t *testing.T) {
	for _, tt := range []struct {
		name, ip, lo, reached string
	}{
		{"unspecified v4", "0.0.0.0", "127.0.0.1", "127.0.0.1"},
		{"this network", "0.1.2.3", "127.0.0.1", "0.1.2.3"},
		{"top of this network", "0.255.255.255", "127.0.0.1", "0.255.255.255"},
		{"unspecified v6", "::", "::1", "::1"},
		{"mapped unspecified", "::ffff:0.0.0.0", "127.0.0.1", "127.0.0.1"},
		{"mapped this network", "::ffff:0.1.2.3", "127.0.0.1", "0.1.2.3"},
		{"loopback", "127.0.0.1", "", "127.0.0.1"},
		{"v6 loopback", "::1", "", "::1"},
		{"v4-compatible", "::0.1.2.3", "", "::1:203"},
		{"after this network", "1.0.0.0", "", "1.0.0.0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ip := netip.MustParseAddr(tt.ip)
			lo, ok := Loopback(ip)
			if got := map[bool]string{true: lo.String(), false: ""}[ok]; got != tt.lo {
				t.Errorf("Loopback(%s) = %q, want %q", ip, got, tt.lo)
			}
			if got := Reached(ip).String(); got != tt.reached {
				t.Errorf("Reached(%s) = %s, want %s", ip, got, tt.reached)
			}
		})
	}
}
