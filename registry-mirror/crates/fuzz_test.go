package crates

import (
	"bytes"
	"testing"

	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver/listing"
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
		if len(again.Lines) != len(idx.Lines) || again.Bad != 0 {
			t.Fatalf("the served file has %d lines (%d bad), want %d valid ones", len(again.Lines), again.Bad, len(idx.Lines))
		}
		for i, l := range idx.Lines {
			if again.Lines[i].Vers != l.Vers || again.Lines[i].Cksum != l.Cksum {
				t.Fatalf("line %d served as %s %s, parsed as %s %s", i, again.Lines[i].Vers, again.Lines[i].Cksum, l.Vers, l.Cksum)
			}
			if got, err := idx.version(l.Name, l.Vers); err != nil || got.Cksum != l.Cksum {
				t.Fatalf("version(%s) = %v, %v", l.Vers, got, err)
			}
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
		if name, err := indexName(p); err == nil && (CheckName(name) != nil || listing.CrateIndexPath(name) != p) {
			t.Fatalf("indexName(%q) = %q, which is not a valid name at that path", p, name)
		}
		if name, _, err := downloadPath(p); err == nil && CheckName(name) != nil {
			t.Fatalf("downloadPath(%q) = %q, which is not a valid name", p, name)
		}
	})
}
