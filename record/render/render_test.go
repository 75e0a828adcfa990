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
