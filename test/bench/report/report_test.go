package main

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// doc is a document with prose around three generated regions.
const doc = `# Benchmarks

Prose before, kept.

<!-- bench:run -->
old
<!-- /bench -->

<!-- bench:targets -->
<!-- /bench -->

Prose between, kept.

<!-- bench:BenchmarkMirrorThroughput -->
| an old table |
<!-- /bench -->

<!-- bench:rest -->
<!-- /bench -->
Prose after, kept.
`

func TestRunRegeneratesTheRegionsOnly(t *testing.T) {
	dir := t.TempDir()
	input, docPath, charts := filepath.Join(dir, "bench.txt"), filepath.Join(dir, "docs", "benchmarks.md"), filepath.Join(dir, "docs", "bench")
	os.MkdirAll(filepath.Dir(docPath), 0o755)
	os.WriteFile(input, []byte(sample), 0o644)
	os.WriteFile(docPath, []byte(doc), 0o644)
	if err := run(input, docPath, charts, false); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(docPath)
	out := string(got)
	for _, want := range []string{
		"Prose before, kept.\n", "Prose between, kept.\n", "Prose after, kept.\n",
		"| benchmark | x-sandtrail-nginx | x-sandtrail-verdaccio | rps-nginx | rps-sandtrail | ns/op |\n",
		"| MirrorThroughput/tarball | **0.3905** | **17.6** | 10,500 | 4,100 | 5,012,345,678 |\n",
		"| MirrorThroughput/packument | **0.62** | | | | 5,012,345,678 |\n",
		"![the ratios of the table against the same run's baseline](bench/mirrorthroughput.svg)\n",
		"| Marshal (median of 2) | **1.6** | 512 | 3 | 2,395 |\n",
		"| tarball throughput ≥0.5× nginx | MirrorThroughput/tarball | x-sandtrail-nginx | ≥ 0.5 | 0.3905 | **no** |\n",
		"| packument throughput ≥2× Verdaccio | MirrorThroughput/packument | x-sandtrail-verdaccio | ≥ 2 | not in this run | — |\n",
		"the whole run took 20 min 34 s", "**failed: BenchmarkRunNpmInstall/hosted**",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the document lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "an old table") || strings.Contains(out, "\nold\n") {
		t.Errorf("an old region body is left:\n%s", out)
	}
	for _, name := range []string{"mirrorthroughput.svg", "rest.svg"} {
		svg, err := os.ReadFile(filepath.Join(charts, name))
		if err != nil {
			t.Fatal(err)
		}
		checkSVG(t, name, svg)
	}
	// Regenerating the regenerated document changes nothing.
	if err := run(input, docPath, charts, false); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(docPath); string(again) != out {
		t.Errorf("a second run changed the document:\n%s", again)
	}
}

// checkSVG checks that svg is well-formed XML with an svg root and a bar
// for each ratio, and no script.
func checkSVG(t *testing.T, name string, svg []byte) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(string(svg)))
	var root string
	rects := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed: %v\n%s", name, err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "script" {
				t.Fatalf("%s has a script", name)
			}
			if se.Name.Local == "rect" {
				rects++
			}
		}
	}
	if root != "svg" || rects < 2 {
		t.Fatalf("%s: root %q, %d rects", name, root, rects)
	}
}

func TestRunFailsOnARegionThatMatchesNothing(t *testing.T) {
	dir := t.TempDir()
	input, docPath := filepath.Join(dir, "bench.txt"), filepath.Join(dir, "benchmarks.md")
	os.WriteFile(input, []byte(sample), 0o644)
	// Every benchmark matches the last region: rest has none either.
	body := "<!-- bench:BenchmarkNoSuchThing -->\nkept\n<!-- /bench -->\n<!-- bench:rest -->\nkept too\n<!-- /bench -->\n"
	os.WriteFile(docPath, []byte(body+"<!-- bench:Benchmark -->\n<!-- /bench -->\n"), 0o644)
	err := run(input, docPath, filepath.Join(dir, "bench"), false)
	if err == nil || !strings.Contains(err.Error(), `region "BenchmarkNoSuchThing" (line 1): no benchmark of the run matches`) {
		t.Fatalf("err = %v", err)
	}
	if err := run(input, docPath, filepath.Join(dir, "bench"), true); err != nil {
		t.Fatalf("-partial: %v", err)
	}
	got, _ := os.ReadFile(docPath)
	if !strings.HasPrefix(string(got), body+"<!-- bench:Benchmark -->\n| benchmark |") {
		t.Fatalf("-partial changed a region with no result, or did not fill the one with results:\n%s", got)
	}
}

func TestReplaceRegionsRejectsBrokenMarkers(t *testing.T) {
	gen := func(string) (string, bool, error) { return "x\n", true, nil }
	for _, tc := range []struct{ name, in, want string }{
		{"not closed", "a\n<!-- bench:A -->\nb\n", `line 2: region "A" is not closed`},
		{"close alone", "a\n<!-- /bench -->\n", "line 2: <!-- /bench --> without a region"},
		{"nested", "<!-- bench:A -->\n<!-- bench:B -->\n<!-- /bench -->\n", `line 2: region "B" opens inside region "A"`},
		{"no key", "<!-- bench: -->\n<!-- /bench -->\n", "line 1: region without a key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := replaceRegions(tc.in, gen)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 1.05: "1.05", 0.3905: "0.3905", 17.6: "17.6", 123.456: "123.5", 4130.2: "4,130",
		1234567: "1,234,567", -2500: "-2,500", 0.000123: "0.000123",
	} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestChartTicksHoldOne(t *testing.T) {
	for _, d := range [][2]float64{{0.9, 1.2}, {0.05, 5000}, {1 / 1.15, 1.15}} {
		ts := chartTicks(d[0], d[1])
		if len(ts) == 0 || len(ts) > 9 {
			t.Errorf("chartTicks(%v) = %v", d, ts)
		}
		found := false
		for _, x := range ts {
			found = found || x == 1
		}
		if !found {
			t.Errorf("chartTicks(%v) = %v, without 1", d, ts)
		}
	}
}
