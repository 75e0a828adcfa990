package pep440

import "testing"

// FuzzParse checks that Parse never panics, and that a parsed version's normalized String parses
// again to an equal version with the same String.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1.0", "v1!2.3.4rc5.post6.dev7+local.8", "1.0-1", "1.0.POST", " 1.0a ", "1.0+ſ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			return
		}
		w, err := Parse(v.String())
		if err != nil || w.Compare(v) != 0 || w.String() != v.String() {
			t.Fatalf("Parse(%q) = %q, reparsed %v, %v", s, v, w, err)
		}
	})
}

// FuzzParseSpecifiers checks that ParseSpecifiers, Contains and Best never panic, and that a
// parsed set's String parses again to the same set.
func FuzzParseSpecifiers(f *testing.F) {
	for _, s := range []string{"~=1.4.2", ">=1.0,<2,!=1.5.*", "==1.0+local", "===foo", "~=1", ">=1.0b1, ==1.*"} {
		f.Add(s)
	}
	probes := []*Version{mustParse("1.0"), mustParse("1.5b1"), mustParse("1!2.0.post1+x")}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseSpecifiers(s)
		if err != nil {
			return
		}
		for _, p := range probes {
			set.Contains(p)
		}
		set.Best(probes)
		again, err := ParseSpecifiers(set.String())
		if err != nil || again.String() != set.String() {
			t.Fatalf("ParseSpecifiers(%q) = %q, reparsed %v, %v", s, set, again, err)
		}
	})
}
