package listing

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

var sum = strings.Repeat("ab", 32)

// crateLine is an index line of leaf at vers with extra fields.
func crateLine(name, vers, extra string) string {
	return `{"name":"` + name + `","vers":"` + vers + `","deps":[],"cksum":"` + sum + `","features":{}` + extra + `}`
}

// TestParseCrateIndex: valid lines are kept in order with their place in
// the file; each kind of bad line is left out, counted, and the first
// named by its line number; every line of a version listed twice is
// left out.
func TestParseCrateIndex(t *testing.T) {
	body := strings.Join([]string{
		crateLine("leaf", "1.0.0", `,"yanked":false`),
		"",
		crateLine("Leaf", "1.0.1", `,"yanked":true,"pubtime":"2025-01-02T03:04:05Z"`) + "\r",
		`not json`,
		crateLine("other", "1.0.2", ""),
		crateLine("leaf", "01.0.0", ""),
		strings.Replace(crateLine("leaf", "1.0.3", ""), sum, "zz", 1),
		crateLine("leaf", "1.0.4", `,"pubtime":"yesterday"`),
		crateLine("leaf", "2.0.0+a", ""),
		crateLine("leaf", "2.0.0+b", ""),
	}, "\n")
	idx := ParseCrateIndex("leaf", []byte(body))
	var got []string
	for _, l := range idx.Lines {
		got = append(got, fmt.Sprintf("%s %s %v %s", l.Name, l.Vers, l.Yanked, l.Published.Format(time.RFC3339)))
		if line := idx.Body[l.Start:l.End]; !bytes.HasPrefix(line, []byte(`{"name":"`+l.Name+`","vers":"`+l.Vers+`"`)) {
			t.Errorf("line %s is at %d:%d, which holds %q", l.Vers, l.Start, l.End, line)
		}
		if l.Cksum != sum {
			t.Errorf("line %s cksum %q, want %q", l.Vers, l.Cksum, sum)
		}
	}
	want := []string{"leaf 1.0.0 false 0001-01-01T00:00:00Z", "Leaf 1.0.1 true 2025-01-02T03:04:05Z"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("lines = %q, want %q", got, want)
	}
	if idx.Bad != 7 || idx.Err == nil || !strings.Contains(idx.Err.Error(), "line 4:") {
		t.Errorf("Bad = %d, Err = %v; want 7, the first naming line 4", idx.Bad, idx.Err)
	}
	if idx := ParseCrateIndex("leaf", []byte(crateLine("leaf", "1.0.0", "")+"\n")); idx.Bad != 0 || idx.Err != nil || len(idx.Lines) != 1 {
		t.Errorf("a valid file = %+v", idx)
	}
	if idx := ParseCrateIndex("leaf", nil); idx.Bad != 0 || len(idx.Lines) != 0 {
		t.Errorf("an empty file = %+v", idx)
	}
}

// TestCheckCrateName: crates.io's rule.
func TestCheckCrateName(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"serde", true}, {"serde_json", true}, {"Inflector", true}, {"a-b_c", true}, {"1x", true}, {strings.Repeat("a", 64), true},
		{"", false}, {"-a", false}, {"_a", false}, {"a.b", false}, {"a b", false}, {"é", false}, {"@a/b", false}, {strings.Repeat("a", 65), false},
	} {
		err := CheckCrateName(tt.name)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrBadCrateName)) {
			t.Errorf("CheckCrateName(%q) = %v, want ok %v (or ErrBadCrateName)", tt.name, err, tt.ok)
		}
	}
}

func TestCrateIndexPath(t *testing.T) {
	for name, want := range map[string]string{"a": "1/a", "AB": "2/ab", "abc": "3/a/abc", "Serde": "se/rd/serde", "serde_json": "se/rd/serde_json"} {
		if got := CrateIndexPath(name); got != want {
			t.Errorf("CrateIndexPath(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestCrateDownloadURL(t *testing.T) {
	for _, tc := range []struct{ name, dl, crate, want string }{
		{name: "crates.io, no markers", dl: "https://static.crates.io/crates", crate: "serde", want: "https://static.crates.io/crates/serde/1.0.0/download"},
		{name: "crate and version", dl: "https://h/{crate}/{crate}-{version}.crate", crate: "serde", want: "https://h/serde/serde-1.0.0.crate"},
		{name: "prefix keeps case", dl: "https://h/{prefix}/{lowerprefix}/{crate}", crate: "Inflector", want: "https://h/In/fl/in/fl/Inflector"},
		{name: "short prefixes", dl: "https://h/{prefix}/{crate}", crate: "abc", want: "https://h/3/a/abc"},
		{name: "two letters", dl: "https://x/{prefix}/{crate}-{version}.crate", crate: "Ab", want: "https://x/2/Ab-1.0.0.crate"},
		{name: "checksum", dl: "https://h/{sha256-checksum}", crate: "a", want: "https://h/" + sum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CrateDownloadURL(tc.dl, tc.crate, "1.0.0", sum); got != tc.want {
				t.Errorf("CrateDownloadURL(%q, %q) = %q, want %q", tc.dl, tc.crate, got, tc.want)
			}
		})
	}
}

func TestParseCrateConfig(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{name: "crates.io", in: `{"dl":"https://static.crates.io/crates","api":"https://crates.io"}`, ok: true},
		{name: "template", in: `{"dl":"http://127.0.0.1:1/{crate}/{version}"}`, ok: true},
		{name: "no dl", in: `{"api":"https://crates.io"}`},
		{name: "relative dl", in: `{"dl":"/crates"}`},
		{name: "other scheme", in: `{"dl":"file:///etc/{crate}"}`},
		{name: "auth required", in: `{"dl":"https://h/","auth-required":true}`},
		{name: "not json", in: `<html>`},
		{name: "percent before a marker", in: `{"dl":"http://h/%{prefix}/{crate}"}`},
		{name: "percent escape", in: `{"dl":"http://h/a%20b/{crate}"}`, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCrateConfig([]byte(tc.in))
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadCrateConfig)) {
				t.Errorf("ParseCrateConfig(%s) = %v, want ok %v (or ErrBadCrateConfig)", tc.in, err, tc.ok)
			}
		})
	}
}

// FuzzParseCrateIndex: any index file parses without panicking; each valid
// line is where it says in the body and parses again on its own to the
// same line; Err is set exactly when lines were left out.
func FuzzParseCrateIndex(f *testing.F) {
	f.Add([]byte(crateLine("leaf", "1.0.0", `,"yanked":false,"pubtime":"2025-01-01T00:00:00Z"`) + "\n"))
	f.Add([]byte("\n\r\n{}\nnot json\n{\"name\":\"LEAF\",\"vers\":\"1.0.0-rc.1+b\",\"cksum\":\"" + strings.Repeat("0", 64) + "\"}"))
	f.Add([]byte(`{"name":"leaf","vers":"01.0.0","cksum":"zz"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		idx := ParseCrateIndex("leaf", b)
		if (idx.Bad == 0) != (idx.Err == nil) {
			t.Fatalf("Bad = %d, Err = %v", idx.Bad, idx.Err)
		}
		for i, l := range idx.Lines {
			if l.Start < 0 || l.End > len(b) || l.Start > l.End {
				t.Fatalf("line %d at %d:%d of %d bytes", i, l.Start, l.End, len(b))
			}
			again, err := parseCrateLine("leaf", b[l.Start:l.End])
			again.Start, again.End = l.Start, l.End
			if err != nil || again != l {
				t.Fatalf("line %d = %+v, parsed again as %+v, %v", i, l, again, err)
			}
			if strings.ToLower(l.Name) != "leaf" || strings.ToLower(l.Cksum) != l.Cksum || len(l.Cksum) != 64 {
				t.Fatalf("line %d = %+v", i, l)
			}
		}
	})
}

// FuzzParseCrateConfig: any config.json parses without panicking, and one
// that is accepted expands to an absolute http(s) URL for any crate.
func FuzzParseCrateConfig(f *testing.F) {
	f.Add([]byte(`{"dl":"https://static.crates.io/crates","api":"https://crates.io"}`))
	f.Add([]byte(`{"dl":"http://127.0.0.1:1/files/{lowerprefix}/{crate}/{crate}-{version}.crate"}`))
	f.Add([]byte(`{"dl":"https://h/{sha256-checksum}","auth-required":true}`))
	f.Add([]byte(`{"dl":7}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCrateConfig(b)
		if err != nil {
			return
		}
		u, err := url.Parse(CrateDownloadURL(c.DL, "a_b-C", "1.0.0+x", "00"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			t.Fatalf("accepted dl %q expands to %v, %v", c.DL, u, err)
		}
	})
}
