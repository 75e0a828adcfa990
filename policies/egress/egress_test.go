package egress

import "testing"

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
