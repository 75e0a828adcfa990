package makefile

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, where the Makefile is, from this
// package's directory (go test runs a test in its package's directory).
var root = filepath.Join("..", "..")

// ruleLine is a rule's first line, "target: prerequisites ## description",
// and not a variable's assignment (X := y, X ?= y).
var ruleLine = regexp.MustCompile(`^([A-Za-z0-9_.-]+)[ \t]*:([^=]|$)`)

// colour is an SGR escape sequence, such as a colour code.
var colour = regexp.MustCompile("\x1b\\[[0-9;]*m")

// targets returns the targets that the Makefile's rules define, in order,
// without the special ones (.PHONY, .DEFAULT_GOAL), and the names that
// .PHONY declares.
func targets(t *testing.T, makefile []byte) (defined, phony []string) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(makefile))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, ".PHONY:"); ok {
			phony = append(phony, strings.Fields(rest)...)
			continue
		}
		m := ruleLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(m[1], ".") || slices.Contains(defined, m[1]) {
			continue
		}
		defined = append(defined, m[1])
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return defined, phony
}

// help runs make with no target (the default, help), its stdout a pipe.
func help(t *testing.T) string {
	t.Helper()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("skipping: make is not on PATH")
	}
	cmd := exec.Command(mk, "--no-print-directory")
	cmd.Dir = root
	// Not the flags of a make that runs this test (make test): this make
	// is a fresh one.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=") || strings.HasPrefix(kv, "MFLAGS=")
	})
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("make: %v\n%s", err, stderr.String())
	}
	return stdout.String()
}

// TestHelpListsEveryTarget: `make` lists each target that the Makefile
// defines, with a description, and, off a terminal, no escape byte.
func TestHelpListsEveryTarget(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defined, phony := targets(t, makefile)
	if len(defined) == 0 {
		t.Fatal("found no targets in the Makefile")
	}
	out := help(t)
	if strings.ContainsRune(out, '\x1b') {
		t.Errorf("make help off a terminal printed an escape byte (a colour code):\n%q", out)
	}
	// The names are read with any colour codes taken out, so that a target
	// is reported missing only when it is.
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(colour.ReplaceAllString(out, "")), "\n") {
		name, desc, _ := strings.Cut(strings.TrimSpace(line), " ")
		listed[name] = strings.TrimSpace(desc)
	}
	for _, target := range defined {
		desc, ok := listed[target]
		switch {
		case !ok:
			t.Errorf("make help does not list target %q (give its rule line a \"## description\")", target)
		case desc == "":
			t.Errorf("make help lists target %q without a description", target)
		}
	}
	for _, name := range phony {
		if !slices.Contains(defined, name) {
			t.Errorf(".PHONY names %q, which no rule defines", name)
		}
	}
	if len(listed) != len(defined) {
		t.Errorf("make help lists %d targets, want the Makefile's %d (%s):\n%s", len(listed), len(defined), strings.Join(defined, " "), out)
	}
}
