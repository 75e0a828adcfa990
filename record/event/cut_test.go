package event

import "testing"

func TestCutAndClip(t *testing.T) {
	for _, c := range []struct {
		name, in     string
		n            int
		cut, clipped string
	}{
		{name: "shorter", in: "abc", n: 5, cut: "abc", clipped: "abc"},
		{name: "exactly n", in: "abcde", n: 5, cut: "abcde", clipped: "abcde"},
		{name: "longer", in: "abcdef", n: 5, cut: "abcde", clipped: "abcde…"},
		{name: "escapes nothing", in: "a\x1bbcdef", n: 3, cut: "a\x1bb", clipped: "a\x1bb…"},
		{name: "empty", in: "", n: 5, cut: "", clipped: ""},
		{name: "inside a rune", in: "ab€cd", n: 3, cut: "ab", clipped: "ab…"},
		{name: "after a rune", in: "ab€cd", n: 5, cut: "ab€", clipped: "ab€…"},
		{name: "zero", in: "€", n: 0, cut: "", clipped: "…"},
		{name: "continuation bytes only", in: "\x80\x80\x80\x80", n: 2, cut: "", clipped: "…"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Cut(c.in, c.n); got != c.cut {
				t.Errorf("Cut(%q, %d) = %q, want %q", c.in, c.n, got, c.cut)
			}
			if got := Clip(c.in, c.n); got != c.clipped {
				t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.n, got, c.clipped)
			}
		})
	}
}
