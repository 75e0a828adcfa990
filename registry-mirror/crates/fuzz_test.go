package crates

import (
	"bytes"
	"net/url"
	"testing"

	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
)

// FuzzParseIndex: any index file parses without panicking; what is served
// of it is exactly its valid lines, each of which parses again to the same
// version, and a version is found only through a valid line.
func FuzzParseIndex(f *testing.F) {
	f.Add([]byte(`{"name":"leaf","vers":"1.0.0","deps":[],"cksum":"` + string(bytes.Repeat([]byte("ab"), 32)) + `","features":{},"yanked":false,"pubtime":"2025-01-01T00:00:00Z"}` + "\n"))
	f.Add([]byte("\n\r\n{}\nnot json\n{\"name\":\"LEAF\",\"vers\":\"1.0.0-rc.1+b\",\"cksum\":\"" + string(bytes.Repeat([]byte("0"), 64)) + "\"}"))
	f.Add([]byte(`{"name":"leaf","vers":"01.0.0","cksum":"zz"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		idx := parseIndex("leaf", b)
		out := idx.render(map[string]fetch.Removal{})
		again := parseIndex("leaf", out)
		if len(again.lines) != len(idx.lines) || again.bad != 0 {
			t.Fatalf("the served file has %d lines (%d bad), want %d valid ones", len(again.lines), again.bad, len(idx.lines))
		}
		for i, l := range idx.lines {
			if again.lines[i].vers != l.vers || again.lines[i].cksum != l.cksum {
				t.Fatalf("line %d served as %s %s, parsed as %s %s", i, again.lines[i].vers, again.lines[i].cksum, l.vers, l.cksum)
			}
			if got, err := idx.version(l.name, l.vers); err != nil || got.cksum != l.cksum {
				t.Fatalf("version(%s) = %v, %v", l.vers, got, err)
			}
		}
	})
}

// FuzzParseConfig: any config.json parses without panicking, and one that
// is accepted expands to an absolute http(s) URL for any crate.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"dl":"https://static.crates.io/crates","api":"https://crates.io"}`))
	f.Add([]byte(`{"dl":"http://127.0.0.1:1/files/{lowerprefix}/{crate}/{crate}-{version}.crate"}`))
	f.Add([]byte(`{"dl":"https://h/{sha256-checksum}","auth-required":true}`))
	f.Add([]byte(`{"dl":7}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseConfig(b)
		if err != nil {
			return
		}
		u, err := url.Parse(downloadURL(c.DL, "a_b-C", "1.0.0+x", "00"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			t.Fatalf("accepted dl %q expands to %v, %v", c.DL, u, err)
		}
	})
}

// FuzzPaths: a client's path is refused or read as a valid name and
// version, never panics, and never escapes the index.
func FuzzPaths(f *testing.F) {
	for _, s := range []string{"se/rd/serde", "1/a", "3/a/abc", "../../x", "leaf/1.0.0/download", "a/../b/download"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if name, err := indexName(p); err == nil && (CheckName(name) != nil || indexPath(name) != p) {
			t.Fatalf("indexName(%q) = %q, which is not a valid name at that path", p, name)
		}
		if name, _, err := downloadPath(p); err == nil && CheckName(name) != nil {
			t.Fatalf("downloadPath(%q) = %q, which is not a valid name", p, name)
		}
	})
}
