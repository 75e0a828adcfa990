package deb

import "testing"

// FuzzParse checks that Parse never panics, and that a parsed version's String parses again to
// an equal version.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1.0", "1:2.30~rc1-1ubuntu0.1", "1.0-", "a1", "2147483648:1", " 1.0 ", "1.0-1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			return
		}
		w, err := Parse(v.String())
		if err != nil || w.Compare(v) != 0 {
			t.Fatalf("Parse(%q) = %q, reparsed %v, %v", s, v, w, err)
		}
	})
}

// FuzzParseRelation checks that ParseRelation and Match never panic, and that a parsed
// relation's String parses again to the same relation.
func FuzzParseRelation(f *testing.F) {
	for _, s := range []string{">= 1.2-1", "<< 2:1.0", "(= 1.0)", "<1.0", "", "1.0", "(>= 1"} {
		f.Add(s)
	}
	probe, _ := Parse("1.2-1")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRelation(s)
		if err != nil {
			return
		}
		r.Match(probe)
		r2, err := ParseRelation(r.String())
		if err != nil || r2.String() != r.String() {
			t.Fatalf("ParseRelation(%q) = %q, reparsed %v, %v", s, r, r2, err)
		}
	})
}
