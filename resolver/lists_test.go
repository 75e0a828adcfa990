package resolver

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The lists of ecosystems and managers outside Go that these tests tie to the registry.
const (
	schemaFile  = "../docs/event.schema.json"
	installFile = "../install.sh"
	depsFile    = "../scripts/deps.sh"
)

// managers are the registry's package managers, in order.
func managers() []string {
	var out []string
	for _, e := range Ecosystems() {
		if e.Manager() != "" {
			out = append(out, e.Manager())
		}
	}
	return out
}

// TestSchemaEcosystemEnum: the JSON Schema's enum of pkg.ecosystem is Names(), in order.
func TestSchemaEcosystemEnum(t *testing.T) {
	b, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties struct {
			Pkg struct {
				Properties struct {
					Ecosystem struct {
						Enum []string `json:"enum"`
					} `json:"ecosystem"`
				} `json:"properties"`
			} `json:"pkg"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("parsing %s: %v", schemaFile, err)
	}
	if got := s.Properties.Pkg.Properties.Ecosystem.Enum; !slices.Equal(got, Names()) {
		t.Errorf("%s: pkg.ecosystem enum = %q, want resolver.Names() = %q", schemaFile, got, Names())
	}
}

// shellFunc is the body of the shell function name in script, and whether script defines it
// (as `name() {` at the start of a line, ending at the next line that is `}`).
func shellFunc(script, name string) (string, bool) {
	_, rest, ok := strings.Cut("\n"+script, "\n"+name+"() {\n")
	if !ok {
		return "", false
	}
	body, _, ok := strings.Cut(rest, "\n}\n")
	return body, ok
}

// TestInstallScriptPointsEveryManager: install.sh has a mirror_MANAGER function for each
// manager of the registry and for no other, and calls each; it links the shim by the
// names `sandtrail-shim list` prints, and the names its header says it links are every
// manager's commands.
func TestInstallScriptPointsEveryManager(t *testing.T) {
	b, err := os.ReadFile(installFile)
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	var defined []string
	for _, m := range regexp.MustCompile(`(?m)^mirror_([a-z0-9_-]+)\(\) \{$`).FindAllStringSubmatch(script, -1) {
		defined = append(defined, m[1])
	}
	calls := regexp.MustCompile(`(?m)^\tmirror_([a-z0-9_-]+)$`).FindAllStringSubmatch(script, -1)
	called := map[string]bool{}
	for _, c := range calls {
		called[c[1]] = true
	}
	for _, m := range managers() {
		if !slices.Contains(defined, m) {
			t.Errorf("%s has no mirror_%s() pointing %s at the mirror (--mirror); every manager of the registry needs one", installFile, m, m)
		}
		if !called[m] {
			t.Errorf("%s never calls mirror_%s in its --mirror block", installFile, m)
		}
	}
	for _, m := range defined {
		if !slices.Contains(managers(), m) {
			t.Errorf("%s defines mirror_%s, and the registry has no manager %s", installFile, m, m)
		}
	}
	if !strings.Contains(script, `$("${ROOT}${PREFIX}/bin/sandtrail-shim" list)`) {
		t.Errorf("%s does not link the shims by the names `sandtrail-shim list` prints", installFile)
	}
	header := regexp.MustCompile(`stands in for \(([^)]*)\)`).FindStringSubmatch(strings.ReplaceAll(script, "\n#    ", ""))
	if header == nil {
		t.Fatalf("%s: no header line naming the shims (stands in for (…))", installFile)
	}
	var want []string
	for _, e := range Ecosystems() {
		want = append(want, e.Commands()...)
	}
	got := strings.Split(strings.ReplaceAll(header[1], " ", ""), ",")
	if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("%s's header says it links the shim as %q, want the registry's commands %q", installFile, got, want)
	}
}

// TestDepsScriptInstallsEveryManager: scripts/deps.sh's managers function has one line for
// each manager of the registry, naming it or one of its commands, and no line for anything
// else.
func TestDepsScriptInstallsEveryManager(t *testing.T) {
	b, err := os.ReadFile(depsFile)
	if err != nil {
		t.Fatal(err)
	}
	body, ok := shellFunc(string(b), "managers")
	if !ok {
		t.Fatalf("%s defines no managers() function", depsFile)
	}
	command := map[string]string{}
	for _, e := range Ecosystems() {
		for _, c := range e.Commands() {
			command[c] = e.Manager()
		}
	}
	var got []string
	for line := range strings.SplitSeq(body, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := ""
		for _, w := range strings.Fields(line) {
			if command[w] != "" {
				m = command[w]
				break
			}
		}
		if m == "" {
			t.Errorf("%s: managers() line %q names no manager of the registry", depsFile, line)
			continue
		}
		got = append(got, m)
	}
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(managers()))) {
		t.Errorf("%s: managers() installs %q, want one line for each manager of the registry, %q", depsFile, got, managers())
	}
}
