package sigma

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func readDocs(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/sigma.md")
	if err != nil {
		t.Skipf("docs/sigma.md not found: %v", err)
	}
	return string(b)
}

// TestDocExamples loads every yaml block of docs/sigma.md, so the
// examples stay valid rules.
func TestDocExamples(t *testing.T) {
	doc := readDocs(t)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(doc, -1)
	if len(blocks) < 2 {
		t.Fatalf("docs/sigma.md has %d yaml examples, want 2 or more", len(blocks))
	}
	for i, b := range blocks {
		if _, err := Parse("docs/sigma.md", []byte(b[1])); err != nil {
			t.Errorf("docs/sigma.md example %d: %v", i, err)
		}
	}
}

// TestDocsListEverything checks that docs/sigma.md names every category,
// every field and every modifier, supported or refused.
func TestDocsListEverything(t *testing.T) {
	doc := readDocs(t)
	var names []string
	for _, c := range categories {
		names = append(names, c.name)
		names = append(names, c.order...)
	}
	for m := range supportedMods {
		names = append(names, m)
	}
	for m := range unsupportedMods {
		names = append(names, m)
	}
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		if !strings.Contains(doc, "`"+n+"`") {
			t.Errorf("docs/sigma.md does not name `%s`", n)
		}
	}
}
