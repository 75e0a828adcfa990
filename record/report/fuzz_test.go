package report

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/sandtrail/sandtrail/record/event"
)

// pageTags are the elements the page's template writes: any other in a
// rendered page came from the record.
var pageTags = map[string]bool{}

func init() {
	for _, t := range strings.Fields(`html head meta title style body header h1 div main section h2 span table tr th td b p br a
		svg line text g rect details summary`) {
		pageTags[t] = true
	}
}

// FuzzEscapes puts an untrusted string everywhere the agent can choose
// one (argv, a path, a domain, a package, a tool, an alert's title) and
// checks that the HTML page has only the template's elements and no event
// handler or script, and that every Markdown table row has only its own
// cells.
func FuzzEscapes(f *testing.F) {
	for _, s := range []string{"<script>alert(1)</script>", `"><img src=x onerror=alert(1)>`, "a|b`c`[d](e)", "</style><svg onload=x>",
		"\x1b[31mred", "javascript:alert(1)", "<!--", "]]><![CDATA[", "@here #1 *x* _y_"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := New("S1")
		for i, e := range knownSession() {
			switch {
			case e.Kind == event.KindExec && e.Proc.Pid == 101:
				e.Proc.Argv = []string{"npm", s}
			case e.File != nil:
				e.File.Path = "/w/" + s
			case e.Net != nil && e.Net.DNS != nil:
				e.Net.DNS.Query = s
			case e.Pkg != nil:
				e.Pkg.Name = s
			case e.Tool != nil:
				e.Tool.Name, e.Tool.InputSummary = s, s
			case e.Alert != nil:
				e.Alert.Title, e.Alert.RuleID = s, s
			}
			b.Add(uint64(i+1), e)
		}
		r := b.Report()
		var page bytes.Buffer
		if err := WriteHTML(&page, r); err != nil {
			t.Fatal(err)
		}
		checkPage(t, page.Bytes())
		var md bytes.Buffer
		if err := WriteMarkdown(&md, r); err != nil {
			t.Fatal(err)
		}
		checkMarkdown(t, md.String())
	})
}

// checkPage fails on an element the template does not write, an event
// handler attribute, or a link that leaves the page.
func checkPage(t *testing.T, page []byte) {
	z := html.NewTokenizer(bytes.NewReader(page))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return
		case html.StartTagToken, html.SelfClosingTagToken:
			name, more := z.TagName()
			if !pageTags[string(name)] {
				t.Fatalf("the page has a <%s> element", name)
			}
			for more {
				var k, v []byte
				k, v, more = z.TagAttr()
				if bytes.HasPrefix(k, []byte("on")) || string(k) == "href" && !bytes.HasPrefix(v, []byte("#")) || string(k) == "src" {
					t.Fatalf("the page's <%s> has %s=%q", name, k, v)
				}
			}
		}
	}
}

// splitCells splits a table row at its unescaped "|", trimmed.
func splitCells(line string) []string {
	var cells []string
	cur := ""
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur += `\|`
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur))
			cur = ""
		default:
			cur += string(line[i])
		}
	}
	return cells[1:]
}

// checkMarkdown fails on a table row with more cells than its header, or
// a cell that is not a code span (the header's excepted).
func checkMarkdown(t *testing.T, md string) {
	cells := 0
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "| ") {
			cells = 0
			continue
		}
		n := strings.Count(line, "|") - strings.Count(line, `\|`)
		switch {
		case cells == 0:
			cells = n
		case n != cells:
			t.Fatalf("a Markdown row has %d cell separators, its table %d: %q", n, cells, line)
		case !strings.HasPrefix(line, "| ---"):
			for _, cell := range splitCells(line) {
				if cell != "" && !strings.HasPrefix(cell, "`") {
					t.Fatalf("a Markdown cell is not a code span: %q in %q", cell, line)
				}
			}
		}
	}
}
