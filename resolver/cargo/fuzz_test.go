package cargo

import "testing"

// FuzzParseVersion checks that ParseVersion never panics, and that a parsed version's String
// parses again to an equal version.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"1.2.3", "1.0.0-alpha.1+build.5", "1.2.3-01", "18446744073709551615.0.0", "1.0.0--"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			return
		}
		w, err := ParseVersion(v.String())
		if err != nil || w.Compare(v) != 0 || w.String() != v.String() {
			t.Fatalf("ParseVersion(%q) = %q, reparsed %v, %v", s, v, w, err)
		}
	})
}

// FuzzParseReq checks that ParseReq and Match never panic, and that a parsed requirement's
// String parses again to the same requirement.
func FuzzParseReq(f *testing.F) {
	for _, s := range []string{"^1.2.3", ">= 1.2, < 1.5", "1.*", "=1.0.0-rc.1", "*", "~0.0", "1.x.x"} {
		f.Add(s)
	}
	probe, _ := ParseVersion("1.2.3-beta.1")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseReq(s)
		if err != nil {
			return
		}
		r.Match(probe)
		r2, err := ParseReq(r.String())
		if err != nil || r2.String() != r.String() {
			t.Fatalf("ParseReq(%q) = %q, reparsed %v, %v", s, r, r2, err)
		}
	})
}
