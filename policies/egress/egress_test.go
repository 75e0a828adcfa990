package egress

import (
	"strings"
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

func TestParseUnixEntry(t *testing.T) {
	for _, tt := range []struct {
		name   string
		in     string
		want   string // Name as a Go-quoted string
		prefix bool
		err    bool
	}{
		{"path", "/run/sandtrail/ingest.sock", "/run/sandtrail/ingest.sock", false, false},
		{"directory", "/run/user/", "/run/user/", true, false},
		{"abstract", "@/tmp/.X11-unix/X0", "\x00/tmp/.X11-unix/X0", false, false},
		{"abstract prefix", "@dbus-*", "\x00dbus-", true, false},
		{"every abstract name", "@*", "\x00", true, false},
		{"escaped NUL and star", `@a\x00b\x2a`, "\x00a\x00b*", false, false},
		{"relative", "sock", "", false, true},
		{"dot dot", "/tmp/../run/x", "", false, true},
		{"dot", "/tmp/./x", "", false, true},
		{"empty abstract", "@", "", false, true},
		{"bad escape", `@a\x`, "", false, true},
		{"bad hex", `@a\xzz`, "", false, true},
		{"too long", "/" + strings.Repeat("a", 108), "", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUnixEntry(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("ParseUnixEntry(%q) error = %v, want error %v", tt.in, err, tt.err)
			}
			if err == nil && (string(got.Name) != tt.want || got.Prefix != tt.prefix) {
				t.Errorf("ParseUnixEntry(%q) = %q prefix %v, want %q prefix %v", tt.in, got.Name, got.Prefix, tt.want, tt.prefix)
			}
		})
	}
}

func FuzzParseUnixEntry(f *testing.F) {
	for _, s := range []string{"/run/x.sock", "/run/", "@name", "@pre*", `@a\x00b`, "rel", "/a/../b", `@\x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseUnixEntry(s)
		if err != nil {
			return
		}
		if len(e.Name) == 0 || len(e.Name) > UnixPathMax {
			t.Fatalf("ParseUnixEntry(%q) = %q: length %d out of 1..%d", s, e.Name, len(e.Name), UnixPathMax)
		}
		if (e.Name[0] == 0) != strings.HasPrefix(s, "@") {
			t.Fatalf("ParseUnixEntry(%q) = %q: abstract does not match the @", s, e.Name)
		}
	})
}
