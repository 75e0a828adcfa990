package render

import (
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

func TestShellJoin(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{name: "plain", argv: []string{"/bin/echo", "a"}, want: "/bin/echo a"},
		{name: "space and quote", argv: []string{"echo", "b c", "it's"}, want: `echo 'b c' 'it'\''s'`},
		{name: "empty arg", argv: []string{"x", ""}, want: "x ''"},
		{name: "control characters", argv: []string{"a\x1b[31m"}, want: `'a\x1b[31m'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShellJoin(tt.argv, 160); got != tt.want {
				t.Errorf("ShellJoin(%q) = %q, want %q", tt.argv, got, tt.want)
			}
		})
	}
}

func TestClean(t *testing.T) {
	tests := []struct {
		name, in string
		max      int
		want     string
	}{
		{name: "plain", in: "hello", max: 10, want: "hello"},
		{name: "escape sequence", in: "a\x1b[31mb", max: 20, want: `a\x1b[31mb`},
		{name: "newline", in: "a\nb", max: 20, want: `a\nb`},
		{name: "invalid utf-8", in: "a\xffb", max: 20, want: `a\xffb`},
		{name: "bidi override", in: "a\u202eb", max: 20, want: `a\u202eb`},
		{name: "cut", in: "abcdef", max: 3, want: "abc…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Clean(tt.in, tt.max); got != tt.want {
				t.Errorf("Clean(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
		})
	}
}

func TestOrDash(t *testing.T) {
	for in, want := range map[string]string{"": "-", "x": "x", "-": "-", " ": " "} {
		if got := OrDash(in); got != want {
			t.Errorf("OrDash(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSummaryFile(t *testing.T) {
	for _, c := range []struct {
		name string
		f    event.File
		want string
	}{
		{"rename", event.File{Op: "rename", Path: "/a", NewPath: "/b"}, "rename /a -> /b"},
		{"symlink", event.File{Op: "link", Path: "/home/a/s", Target: "/etc/shadow", Symlink: true}, "link /home/a/s -> /etc/shadow"},
		{"refused hard link", event.File{Op: "link", Path: "/home/a/h", Target: "/etc/shadow", Errno: "EPERM"}, "link /home/a/h -> /etc/shadow (EPERM)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.f
			if got := Summary(&event.Event{Kind: event.FileKind(f.Op), File: &f}); !strings.HasPrefix(got, c.want) {
				t.Errorf("Summary(%+v) = %q, want it to start with %q", f, got, c.want)
			}
		})
	}
}

func TestStepLimits(t *testing.T) {
	tests := []struct {
		name string
		ev   *event.Event
		want string
	}{
		{name: "session limits without a net rate",
			ev:   &event.Event{Session: &event.Session{Op: "create", Limits: &event.Limits{MemoryBytes: 1 << 20, Pids: 8}}},
			want: "limits=memory:1048576,cpus:0,pids:8,timeout_ms:0,disk:0"},
		{name: "session limits with a net rate",
			ev:   &event.Event{Session: &event.Session{Op: "create", Limits: &event.Limits{NetRate: 1 << 20, NetRateAction: "warn"}}},
			want: "limits=memory:0,cpus:0,pids:0,timeout_ms:0,disk:0,net_rate:1048576:warn"},
		{name: "net_rate hit",
			ev:   &event.Event{Limit: &event.Limit{Type: "net_rate", Measured: 3 << 20, Configured: 1 << 20, Unit: "B/s", Action: "throttle"}},
			want: "net_rate: measured 3145728 B/s, configured 1048576 B/s, throttle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Step(tt.ev); got != tt.want {
				t.Errorf("Step(%s) = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
}

func TestSummaryNet(t *testing.T) {
	for _, c := range []struct {
		name string
		n    event.Net
		want string
	}{
		{"unix connect", event.Net{Op: "connect", Proto: "unix", UnixPath: "@dbus", Verdict: "blocked"}, "connect unix @dbus [blocked]"},
		{"refused packet socket", event.Net{Op: "socket", Family: "packet", SockType: "raw", Errno: "EPERM", Verdict: "allowed"}, "socket packet/raw (EPERM) [allowed]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := c.n
			if got := Summary(&event.Event{Kind: event.KindNetConnect, Net: &n}); !strings.HasPrefix(got, c.want) {
				t.Errorf("Summary(%+v) = %q, want it to start with %q", n, got, c.want)
			}
		})
	}
}

func TestSummaryRetention(t *testing.T) {
	uid := uint32(0)
	for _, c := range []struct {
		name string
		r    event.Retention
		want string
	}{
		{"prune", event.Retention{Op: "prune", Entries: 12, Sessions: []event.PrunedSession{{ID: "a"}, {ID: "b"}}, Sessionless: 2, HotDays: 90},
			"pruned 12 entries: 2 sessions, 2 of no session (hot window 90 days)"},
		{"hold", event.Retention{Op: "hold", Session: "s1", UID: &uid, Actor: "root (uid 0)", Reason: "case 12"},
			`hold s1 by root (uid 0) reason="case 12"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.r
			if got := Summary(&event.Event{Kind: "retention." + r.Op, Retention: &r}); got != c.want {
				t.Errorf("Summary = %q, want %q", got, c.want)
			}
		})
	}
}
