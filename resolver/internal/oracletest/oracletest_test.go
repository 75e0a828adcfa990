package oracletest

import (
	"os/exec"
	"testing"
)

// TestRun uses the shell as an oracle: it echoes the cases file back, so
// the results are the cases.
func TestRun(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("skipping: needs sh")
	}
	cases := []string{"a", "b\"c", ""}
	got := Run[string, string](t, cases, "sh", "-c", `cat "$0"`)
	if len(got) != len(cases) {
		t.Fatalf("Run(%q) = %q, want %q", cases, got, cases)
	}
	for i := range cases {
		if got[i] != cases[i] {
			t.Errorf("Run(%q)[%d] = %q, want %q", cases, i, got[i], cases[i])
		}
	}
}
