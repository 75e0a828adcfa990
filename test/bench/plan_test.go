package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// benchFunc is a benchmark's declaration.
var benchFunc = regexp.MustCompile(`(?m)^func (Benchmark\w+)\(b \*testing\.B\)`)

// TestRunPlanNamesEveryBenchmark keeps run.sh's plan and the benchmarks in
// step: every benchmark of the packages that `make bench` runs is in the
// plan (else it would never run), and every benchmark of the plan exists.
func TestRunPlanNamesEveryBenchmark(t *testing.T) {
	out, err := exec.Command("bash", "run.sh", "--plan").Output()
	if err != nil {
		t.Fatalf("run.sh --plan: %v", err)
	}
	var plan []string
	pkgs := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, name, _ := strings.Cut(l, " ")
		pkgs[pkg] = true
		plan = append(plan, pkg+" "+name)
	}
	var code []string
	for pkg := range pkgs {
		files, _ := filepath.Glob(filepath.Join("..", "..", pkg, "*_test.go"))
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range benchFunc.FindAllStringSubmatch(string(src), -1) {
				code = append(code, pkg+" "+m[1])
			}
		}
	}
	for _, c := range code {
		if !slices.Contains(plan, c) {
			t.Errorf("%s is not in run.sh's plan: add it with its -benchtime", c)
		}
	}
	for _, p := range plan {
		if !slices.Contains(code, p) {
			t.Errorf("run.sh's plan names %s, which is not a benchmark", p)
		}
	}
}
