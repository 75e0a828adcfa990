package sigma

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestGlobAgainstRegexp compares the wildcard matcher with the regular
// expression the same pattern means, over random patterns and texts of a
// small alphabet (with a two-byte character, since ? is one character).
func TestGlobAgainstRegexp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alpha := []string{"a", "b", "é"}
	pick := func(n int, extra ...string) string {
		var b strings.Builder
		all := append(append([]string(nil), alpha...), extra...)
		for i := 0; i < n; i++ {
			b.WriteString(all[rng.IntN(len(all))])
		}
		return b.String()
	}
	for i := 0; i < 20000; i++ {
		pat := pick(rng.IntN(7), "*", "?", "*")
		text := pick(rng.IntN(8))
		var re strings.Builder
		re.WriteString("^")
		for _, r := range pat {
			switch r {
			case '*':
				re.WriteString(".*")
			case '?':
				re.WriteString(".")
			default:
				re.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		re.WriteString("$")
		want := regexp.MustCompile("(?s)" + re.String()).MatchString(text)
		m := newStrMatcher(parseSigmaString(pat), true, false)
		if got := m.match(nil, text, text); got != want {
			t.Fatalf("pattern %q on %q: %v, want %v (mode %d)", pat, text, got, want, m.mode)
		}
	}
}

// TestParseSigmaString checks the escapes of the specification.
func TestParseSigmaString(t *testing.T) {
	tests := []struct{ in, want string }{
		{`a*b`, `a` + "\x00*" + `b`},
		{`a\*b`, `a*b`},
		{`a\?b`, `a?b`},
		{`a\\*b`, `a\` + "\x00*" + `b`},
		{`a\\\*b`, `a\*b`},
		{`C:\Windows\x`, `C:\Windows\x`},
		{`a\\\\b`, `a\\b`},
		{`end\`, `end\`},
	}
	for _, tc := range tests {
		var b strings.Builder
		for _, tk := range parseSigmaString(tc.in) {
			if tk.wild != 0 {
				b.WriteString("\x00" + string(tk.wild))
			} else {
				b.WriteString(tk.lit)
			}
		}
		if got := b.String(); got != tc.want {
			t.Errorf("parseSigmaString(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
