package pkgview

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// bomEvents is a session with a package of each kind of row.
func bomEvents() []*event.Event {
	r := newRec("sess-42")
	r.fetch("npm", "@babel/core", "7.24.0", sriA, "served").Pkg.Purl = "pkg:npm/%40babel/core@7.24.0"
	r.install("npm", "@babel/core", "7.24.0", sriA, 11)
	r.fetch("pypi", "requests", "2.31.0", shaA, "served")
	r.install("pypi", "requests", "2.31.0", shaB, 12) // a mismatch: the mirror's hash goes in the BOM
	r.fetch("cargo", "cc", "1.0.83", hexB, "served")
	r.install("deb", "curl", "7.88.1-10+deb12u5", shaA, 13)
	r.fetch("npm", "evil", "6.6.6", sriB, "blocked")
	r.blocked("npm", "worse", "^1", "blocklist")
	// A bundled copy beside the registry's copy of its name and version.
	bundling(r.fetch("npm", "carrier", "1.0.0", sriB, "served"), "inner")
	r.fetch("npm", "inner", "1.0.0", sriA, "served")
	r.installAt("carrier", "1.0.0", sriB, "node_modules/carrier", "", 11)
	r.installAt("inner", "1.0.0", "", "node_modules/carrier/node_modules/inner", "pkg:npm/carrier@1.0.0", 11)
	r.installAt("inner", "1.0.0", sriA, "node_modules/inner", "", 11)
	return r.evs
}

func TestCycloneDX(t *testing.T) {
	b, err := CycloneDX(build(bomEvents()), "sess-42")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "cyclonedx.golden.json")
	if *update {
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("CycloneDX = %s\nwant (%s) %s", b, golden, want)
	}
	checkBOM(t, b)
	again, _ := CycloneDX(build(bomEvents()), "sess-42")
	other, _ := CycloneDX(build(bomEvents()), "sess-43")
	if !bytes.Equal(b, again) || bytes.Equal(b, other) {
		t.Error("CycloneDX is not a function of the view and the session")
	}
}

// checkBOM checks the parts of the CycloneDX 1.6 schema that sandtrail
// writes: the required fields and their patterns and enums.
func checkBOM(t *testing.T, b []byte) {
	t.Helper()
	var bom struct {
		BOMFormat    string `json:"bomFormat"`
		SpecVersion  string `json:"specVersion"`
		SerialNumber string `json:"serialNumber"`
		Version      int    `json:"version"`
		Metadata     struct {
			Timestamp string `json:"timestamp"`
			Tools     struct {
				Components []struct{ Type, Name string } `json:"components"`
			} `json:"tools"`
			Properties []struct{ Name, Value string }
		} `json:"metadata"`
		Components []struct {
			Type, Name, Version, Purl, Group string
			BOMRef                           string `json:"bom-ref"`
			Hashes                           []struct{ Alg, Content string }
			ExternalReferences               []struct{ Type, URL string } `json:"externalReferences"`
			Properties                       []struct{ Name, Value string }
		} `json:"components"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&bom); err != nil {
		t.Fatalf("decoding the BOM: %v", err)
	}
	serial := regexp.MustCompile(`^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	hexRE := regexp.MustCompile(`^([a-fA-F0-9]{32}|[a-fA-F0-9]{40}|[a-fA-F0-9]{64}|[a-fA-F0-9]{96}|[a-fA-F0-9]{128})$`)
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion != "1.6" || bom.Version != 1 || !serial.MatchString(bom.SerialNumber) {
		t.Errorf("BOM header = %q %q %d %q", bom.BOMFormat, bom.SpecVersion, bom.Version, bom.SerialNumber)
	}
	if bom.Metadata.Timestamp != "2026-11-29T08:00:00Z" || len(bom.Metadata.Tools.Components) != 1 {
		t.Errorf("BOM metadata = %+v", bom.Metadata)
	}
	var names []string
	for _, c := range bom.Components {
		names = append(names, c.Group+"/"+c.Name+"@"+c.Version)
		// A bundled copy has no artifact of its own, and so no hash.
		bundled := slices.ContainsFunc(c.Properties, func(p struct{ Name, Value string }) bool {
			return p.Name == "sandtrail:bundled_in" && p.Value != ""
		})
		if c.Type != "library" || c.Name == "" || c.BOMRef == "" || c.Purl == "" || len(c.Hashes) == 0 && !bundled || len(c.Hashes) > 0 && bundled {
			t.Errorf("component = %+v", c)
		}
		for _, h := range c.Hashes {
			if !slices.Contains([]string{"SHA-1", "SHA-256", "SHA-384", "SHA-512"}, h.Alg) || !hexRE.MatchString(h.Content) {
				t.Errorf("component %s hash = %+v", c.Name, h)
			}
		}
		for _, r := range c.ExternalReferences {
			if r.Type != "distribution" || r.URL == "" {
				t.Errorf("component %s reference = %+v", c.Name, r)
			}
		}
	}
	want := []string{"@babel/core@7.24.0", "/requests@2.31.0", "/cc@1.0.83", "/curl@7.88.1-10+deb12u5", "/carrier@1.0.0", "/inner@1.0.0", "/inner@1.0.0"}
	if !slices.Equal(names, want) {
		t.Errorf("BOM components = %q, want %q (no blocked, refused or kernel_only rows)", names, want)
	}
}
