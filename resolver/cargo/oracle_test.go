package cargo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// caseGen generates Cargo versions and requirements deterministically, biased toward the edge
// cases: ^0.0.x and ^0.x, partial versions, wildcards, comma lists and prereleases.
type caseGen struct{ r *rand.Rand }

func newCaseGen(seed uint64) *caseGen { return &caseGen{rand.New(rand.NewPCG(seed, 0xca5))} }

func (g *caseGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *caseGen) n() string { return strconv.Itoa(g.r.IntN(3)) }

func (g *caseGen) pre() string {
	if g.r.IntN(5) == 0 {
		return "-" + g.pick("alpha", "alpha.1", "beta", "beta.2", "beta.11", "rc.1", "0", "1")
	}
	return ""
}

func (g *caseGen) version() string { return g.n() + "." + g.n() + "." + g.n() + g.pre() }

func (g *caseGen) partial() string {
	switch g.r.IntN(6) {
	case 0:
		return g.n()
	case 1:
		return g.n() + "." + g.pick("*", "x", "X", g.n())
	case 2:
		return g.n() + "." + g.n() + "." + g.pick("*", "x")
	}
	return g.n() + "." + g.n() + "." + g.n() + g.pre()
}

func (g *caseGen) req() string {
	if g.r.IntN(25) == 0 {
		return g.pick("*", "x", " * ", "1.0 || 2", "1.0 - 2.0", "v1.0", "01.2", "1.2,", "*, 1", ">=*", "1.*.3", "1.2.3-", "1.2.3-01", "~ 1 . 2", "")
	}
	var parts []string
	for k := 1 + g.r.IntN(2)*g.r.IntN(3); k > 0; k-- {
		parts = append(parts, g.pick("", "", "^", "~", "=", ">", ">=", "<", "<=")+g.pick("", "", " ")+g.partial())
	}
	return strings.Join(parts, g.pick(", ", ","))
}

type cargoCase struct {
	name, req string
	cands     []string
	want      string // this package's pick, "" for none
}

// cargoRun writes a local registry holding cases' candidates and a package depending on each
// case's crate with its requirement, runs cargo generate-lockfile offline, and returns the
// locked versions by crate name, or cargo's error output.
func cargoRun(t *testing.T, cases []cargoCase) (map[string]string, string) {
	t.Helper()
	dir := t.TempDir()
	reg, proj := filepath.Join(dir, "reg"), filepath.Join(dir, "proj")
	var toml strings.Builder
	toml.WriteString("[package]\nname = \"root\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n")
	for _, c := range cases {
		idx := filepath.Join(reg, "index", c.name[:2], c.name[2:4], c.name)
		if err := os.MkdirAll(filepath.Dir(idx), 0o755); err != nil {
			t.Fatal(err)
		}
		var lines bytes.Buffer
		for _, v := range c.cands {
			line, _ := json.Marshal(map[string]any{"name": c.name, "vers": v, "deps": []any{}, "cksum": strings.Repeat("0", 64), "features": map[string]any{}, "yanked": false})
			lines.Write(append(line, '\n'))
		}
		if err := os.WriteFile(idx, lines.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&toml, "%s = %q\n", c.name, c.req)
	}
	for _, f := range []struct{ path, body string }{
		{filepath.Join(proj, "Cargo.toml"), toml.String()},
		{filepath.Join(proj, "src", "lib.rs"), ""},
		{filepath.Join(proj, ".cargo", "config.toml"), fmt.Sprintf("[source.crates-io]\nreplace-with = \"local\"\n[source.local]\nlocal-registry = %q\n", reg)},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("cargo", "generate-lockfile", "--offline")
	cmd.Dir = proj
	cmd.Env = append(os.Environ(), "CARGO_HOME="+filepath.Join(dir, "cargo-home"), "CARGO_TERM_COLOR=never")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, string(out)
	}
	lock, err := os.ReadFile(filepath.Join(proj, "Cargo.lock"))
	if err != nil {
		t.Fatal(err)
	}
	locked := map[string]string{}
	var name string
	sc := bufio.NewScanner(bytes.NewReader(lock))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "name = "); ok {
			name, _ = strconv.Unquote(v)
		}
		if v, ok := strings.CutPrefix(line, "version = "); ok && name != "" {
			locked[name], _ = strconv.Unquote(v)
			name = ""
		}
	}
	return locked, ""
}

// TestDifferentialCargo checks ParseReq, Match and the highest-match pick against Cargo itself:
// cargo generate-lockfile, offline, over a local registry that the test writes. All cases
// that this package expects to resolve go into one package with one dependency each; each case
// expected not to resolve (no match, or an invalid requirement) is run alone, since cargo stops
// at the first failure.
func TestDifferentialCargo(t *testing.T) {
	if _, err := exec.LookPath("cargo"); err != nil {
		t.Skip("cargo is not installed: the differential test needs it as the oracle")
	}
	if out, err := exec.Command("cargo", "--version").CombinedOutput(); err != nil {
		t.Skipf("cargo does not run (%v: %s): the differential test needs it as the oracle", err, out)
	}
	g := newCaseGen(1)
	var matching, missing, invalid []cargoCase
	for i := 0; len(matching) < 1000 || len(missing) < 40 || len(invalid) < 15; i++ {
		c := cargoCase{name: fmt.Sprintf("ca%04d", i), req: g.req()}
		seen := map[string]bool{}
		var vs []*Version
		for k := 1 + g.r.IntN(7); k > 0; k-- {
			s := g.version()
			if seen[s] {
				continue
			}
			seen[s] = true
			c.cands = append(c.cands, s)
			vs = append(vs, mustVersion(t, s))
		}
		r, err := ParseReq(c.req)
		switch {
		case err != nil:
			if len(invalid) < 15 {
				invalid = append(invalid, c)
			}
			continue
		}
		best := -1
		for j, v := range vs {
			if r.Match(v) && (best < 0 || v.Compare(vs[best]) > 0) {
				best = j
			}
		}
		if best < 0 {
			if len(missing) < 40 {
				missing = append(missing, c)
			}
			continue
		}
		if len(matching) < 1000 {
			c.want = c.cands[best]
			matching = append(matching, c)
		}
	}
	locked, errOut := cargoRun(t, matching)
	if errOut != "" {
		t.Fatalf("cargo failed on requirements that Match says resolve:\n%s", errOut)
	}
	diffs := 0
	for _, c := range matching {
		if got := locked[c.name]; got != c.want {
			diffs++
			t.Errorf("best of %q for %q = %s, cargo locked %q", c.cands, c.req, c.want, got)
		}
	}
	for _, c := range missing {
		if _, errOut := cargoRun(t, []cargoCase{c}); !strings.Contains(errOut, "failed to select a version") {
			diffs++
			t.Errorf("no candidate of %q matches %q, but cargo resolved it (%q)", c.cands, c.req, errOut)
		}
	}
	for _, c := range invalid {
		if _, errOut := cargoRun(t, []cargoCase{c}); !strings.Contains(errOut, "failed to parse") {
			diffs++
			t.Errorf("ParseReq(%q) fails, but cargo accepted it (%q)", c.req, errOut)
		}
	}
	t.Logf("%d cases (%d resolved in one lockfile, %d without a match, %d invalid), %d differences", len(matching)+len(missing)+len(invalid), len(matching), len(missing), len(invalid), diffs)
}
