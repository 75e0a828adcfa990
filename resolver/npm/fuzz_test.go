package npm

import "testing"

// FuzzParseVersion checks that ParseVersion never panics, and that a parsed version's String
// parses again to an equal version. (As in node-semver, normalizing can lengthen a loose version,
// "1.2.3beta" to "1.2.3-beta", past the 256-character limit; such versions are not reparsed.)
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"1.2.3", "v1.2.3-beta.1+build", "=1.2.3beta", "01.2.3", "9007199254740992.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, opts := range []Options{{}, NPM} {
			v, err := ParseVersion(s, opts)
			if err != nil || len(v.String()) > maxLength {
				continue
			}
			w, err := ParseVersion(v.String(), NPM)
			if err != nil {
				t.Fatalf("ParseVersion(%q) = %q, which does not parse: %v", s, v, err)
			}
			if c := v.Compare(w); c != 0 || w.String() != v.String() {
				t.Fatalf("ParseVersion(%q) = %q, reparsed %q (compare %d)", s, v, w, c)
			}
		}
	})
}

// FuzzParseRange checks that ParseRange and Test never panic, and that a parsed range's String
// parses again to a range that answers the same on probe versions. (The normalized text itself
// is not a fixed point in node-semver either: "000" normalizes to ">=0.0.0 <1.0.0-0", which
// normalizes to "<1.0.0-0".)
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"^1.2.3", "1.2 - 2.3.4", "<1 || >=2.0.0-rc.1", "~>1.x", "*", ">=1.0.0, <2", "^0.0.x"} {
		f.Add(s)
	}
	var probes []*Version
	for _, p := range []string{"0.0.0", "0.0.1-rc.1", "0.5.0", "1.0.0-0", "1.2.3-beta.1", "1.2.3", "1.9.9", "2.0.0", "2.0.0-rc.1", "10.20.30"} {
		v, err := ParseVersion(p, NPM)
		if err != nil {
			f.Fatal(err)
		}
		probes = append(probes, v)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, opts := range []Options{{}, NPM, {Loose: true, IncludePrerelease: true}} {
			r, err := ParseRange(s, opts)
			if err != nil {
				continue
			}
			r2, err := ParseRange(r.String(), opts)
			if err != nil {
				t.Fatalf("ParseRange(%q) = %q, which does not parse: %v", s, r, err)
			}
			for _, p := range probes {
				if r.Test(p) != r2.Test(p) {
					t.Fatalf("ParseRange(%q) = %q, reparsed %q, which differs on %s", s, r, r2, p)
				}
			}
		}
	})
}
