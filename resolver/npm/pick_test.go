package npm

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/resolver/internal/oracletest"
)

// TestDifferentialPickManifest checks BestWithTags against npm's own npm-pick-manifest over
// generated packuments (versions and dist-tags) and specs: dist-tag names, exact (loose)
// versions and ranges.
func TestDifferentialPickManifest(t *testing.T) {
	npmDir := filepath.Dir(filepath.Dir(semverDir(t)))
	g := newCaseGen(2)
	type pickCase struct {
		Spec     string            `json:"spec"`
		Versions []string          `json:"versions"`
		Tags     map[string]string `json:"tags"`
	}
	var cases []pickCase
	for i := 0; i < 1500; i++ {
		seen := map[string]bool{}
		var versions []string
		for k := 1 + g.r.IntN(8); k > 0; k-- {
			v, err := ParseVersion(g.version(), NPM)
			if err != nil || seen[v.String()] {
				continue
			}
			seen[v.String()] = true
			versions = append(versions, v.String()) // packument keys are normalized
		}
		if len(versions) == 0 {
			continue
		}
		tags := map[string]string{}
		if g.r.IntN(5) != 0 {
			tags["latest"] = versions[g.r.IntN(len(versions))]
		} else if g.r.IntN(2) == 0 {
			tags["latest"] = "9.9.9"
		}
		tags["next"] = versions[g.r.IntN(len(versions))]
		var spec string
		switch g.r.IntN(6) {
		case 0:
			spec = g.pick("", "latest", "next", "beta", "*", "x", "^1", "1.x")
		case 1:
			spec = g.prefix() + versions[g.r.IntN(len(versions))]
		default:
			spec = strings.TrimSpace(g.rangeStr())
		}
		if strings.ContainsAny(spec, "/\\:@#") || strings.HasSuffix(spec, ".tgz") {
			continue // npm reads these as files, git or aliases, not registry specs
		}
		cases = append(cases, pickCase{Spec: spec, Versions: versions, Tags: tags})
	}
	want := oracletest.Run[pickCase, *string](t, cases, "node", filepath.Join("testdata", "pick.js"), npmDir)
	var diffs, picked int
	for i, c := range cases {
		got, err := BestWithTags(c.Spec, c.Versions, c.Tags)
		w := ""
		if want[i] != nil {
			w = *want[i]
			picked++
		}
		if (err == nil) != (want[i] != nil) || got != w {
			diffs++
			t.Errorf("BestWithTags(%q, %q, %v) = %q, %v; npm-pick-manifest %q", c.Spec, c.Versions, c.Tags, got, err, w)
		}
	}
	t.Logf("%d cases (%d picked), %d differences", len(cases), picked, diffs)
}
