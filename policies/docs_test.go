package policies

import (
	"os"
	"strings"
	"testing"
)

// TestDocExamples parses every yaml block of docs/policy.md, so the examples
// there stay valid policies.
func TestDocExamples(t *testing.T) {
	b, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Skipf("docs/policy.md not found: %v", err)
	}
	blocks := strings.Split(string(b), "```yaml\n")
	if len(blocks) < 2 {
		t.Fatal("docs/policy.md has no yaml examples")
	}
	for i, blk := range blocks[1:] {
		body, _, ok := strings.Cut(blk, "```")
		if !ok {
			t.Fatalf("example %d is not closed", i)
		}
		if _, err := Parse("example.yaml", []byte(body)); err != nil {
			t.Errorf("docs/policy.md example %d: %v", i, err)
		}
	}
}
