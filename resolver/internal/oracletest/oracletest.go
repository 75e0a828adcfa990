// Package oracletest runs the reference implementations ("oracles") that
// the resolver's differential tests compare against: node-semver,
// npm-pick-manifest, Python's packaging. An oracle is a program that reads
// a JSON array of cases from the file named by its last argument and
// writes a JSON array with one result per case.
package oracletest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Run writes cases as JSON to a temporary file, runs the program name with
// args and that file's path, and returns its decoded results. It fails tb
// if the program fails, its output does not decode, or it returns other
// than one result per case.
func Run[C, R any](tb testing.TB, cases []C, name string, args ...string) []R {
	tb.Helper()
	in, err := json.Marshal(cases)
	if err != nil {
		tb.Fatal(err)
	}
	file := filepath.Join(tb.TempDir(), "cases.json")
	if err := os.WriteFile(file, in, 0o600); err != nil {
		tb.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(name, append(args, file)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("running oracle %s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	var res []R
	if err := json.Unmarshal(out, &res); err != nil {
		tb.Fatalf("decoding oracle output: %v", err)
	}
	if len(res) != len(cases) {
		tb.Fatalf("oracle returned %d results for %d cases", len(res), len(cases))
	}
	return res
}
