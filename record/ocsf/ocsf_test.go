package ocsf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// facts are the OCSF 1.8.0 schema's required attributes and at-least-one
// constraints of the classes and objects sandtrail writes, taken from
// https://github.com/ocsf/ocsf-schema at tag 1.8.0 (testdata).
type facts struct {
	Version string `json:"ocsf_version"`
	Classes map[string]struct {
		ClassUID    int                 `json:"class_uid"`
		Required    []string            `json:"required"`
		Constraints map[string][]string `json:"constraints"`
	} `json:"classes"`
	Objects map[string]struct {
		Required    []string            `json:"required"`
		Constraints map[string][]string `json:"constraints"`
	} `json:"objects"`
}

func loadFacts(t *testing.T) facts {
	t.Helper()
	b, err := os.ReadFile("testdata/ocsf-1.8.0-required.json")
	if err != nil {
		t.Fatal(err)
	}
	var f facts
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if f.Version != Version {
		t.Fatalf("facts are of OCSF %s, the mapping writes %s", f.Version, Version)
	}
	return f
}

// extensionRequired are the attributes sandtrail's extension classes
// require beside the base event's (docs/ocsf.md).
var extensionRequired = map[int][]string{
	classSession: {"sandbox_session"},
	classLimit:   {"resource_limit"},
}

// objectOf names the OCSF object each attribute of ours holds.
var objectOf = map[string]string{
	"metadata": "metadata", "device": "device", "actor": "actor", "process": "process", "file": "file",
	"dst_endpoint": "network_endpoint", "src_endpoint": "network_endpoint", "query": "dns_query",
	"http_request": "http_request", "finding_info": "finding_info", "package": "package", "app": "product", "api": "api",
	"hash": "fingerprint", "hashes": "fingerprint", "sbom": "sbom", "software_components": "software_component",
}

// check reports what o lacks of the object's required attributes and
// constraints, and recurses into the objects it holds.
func check(t *testing.T, f facts, where string, o map[string]any, required []string, cons map[string][]string) {
	t.Helper()
	for _, r := range required {
		if _, ok := o[r]; !ok {
			t.Errorf("%s: required attribute %q missing", where, r)
		}
	}
	if alo := cons["at_least_one"]; len(alo) > 0 {
		found := false
		for _, a := range alo {
			if _, ok := o[a]; ok {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: none of %v (at least one is required)", where, alo)
		}
	}
	for k, v := range o {
		obj := objectOf[k]
		if obj == "" {
			continue
		}
		of, ok := f.Objects[obj]
		if !ok {
			t.Fatalf("no facts for object %s", obj)
		}
		subs, _ := v.([]any)
		if sub, ok := v.(map[string]any); ok {
			subs = []any{sub}
		}
		for i, s := range subs {
			if sub, ok := s.(map[string]any); ok {
				check(t, f, fmt.Sprintf("%s.%s[%d]", where, k, i), sub, of.Required, of.Constraints)
			}
		}
	}
}

// TestRequiredAttributes maps the example event of every kind, each to a
// class,
// (record/event/testdata) and checks the OCSF event against the schema's
// required attributes and constraints of its class and of the objects it
// holds, and type_uid = class_uid*100 + activity_id.
func TestRequiredAttributes(t *testing.T) {
	f := loadFacts(t)
	files, err := filepath.Glob("../event/testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example events: %v", err)
	}
	seen := map[string]bool{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		e, err := event.Unmarshal(b)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		seen[e.Kind] = true
		t.Run(e.Kind, func(t *testing.T) {
			o, ok := Map(e, Product{Name: "sandtrail", Vendor: "sandtrail", Version: "test"})
			if !ok {
				t.Fatalf("Map(%s) = unmapped", e.Kind)
			}
			b, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			uid := int(m["class_uid"].(float64))
			if own, ok := extensionRequired[uid]; ok {
				// The base event's required attributes, as Event Log
				// Activity (which adds none of its own) has them.
				base := f.Classes["event_log_actvity"].Required
				check(t, f, "extension class", m, append(append([]string(nil), base...), own...), nil)
			} else {
				var name string
				for n, c := range f.Classes {
					if c.ClassUID == uid {
						name = n
					}
				}
				if name == "" {
					t.Fatalf("class_uid %d is not in the facts", uid)
				}
				c := f.Classes[name]
				check(t, f, name, m, c.Required, c.Constraints)
			}
			if got, want := int(m["type_uid"].(float64)), uid*100+int(m["activity_id"].(float64)); got != want {
				t.Errorf("type_uid = %d, want %d", got, want)
			}
			md := m["metadata"].(map[string]any)
			if md["version"] != Version || int(md["sequence"].(float64)) != int(e.Seq) || (e.SessionID != "" && md["correlation_uid"] != e.SessionID) {
				t.Errorf("metadata = %v, want version %s, sequence %d, correlation_uid %q", md, Version, e.Seq, e.SessionID)
			}
		})
	}
	for _, k := range event.Kinds {
		if !seen[k] {
			t.Errorf("no example event of %s in record/event/testdata: every kind must map", k)
		}
	}
}

// TestSoftwareInventory maps a session's package list to Software
// Inventory Info (5020) and checks it against the schema's required
// attributes of the class and of the objects it holds (the sbom, its
// software components and their fingerprints), with each hash's
// algorithm and value as OCSF writes them.
func TestSoftwareInventory(t *testing.T) {
	f := loadFacts(t)
	inv := Inventory{SessionID: "sess-1", Host: "web1", Time: time.Unix(1700000000, 0), Packages: []*event.Pkg{
		{Ecosystem: "npm", Name: "left-pad", Resolved: "1.3.0", Purl: "pkg:npm/left-pad@1.3.0", Hash: "sha512-3q2+7w=="},
		{Ecosystem: "pypi", Name: "requests", Resolved: "2.32.3", Hash: "sha256:deadbeef"},
		{Ecosystem: "cargo", Name: "serde", Requested: "^1", Hash: "md5sum"},
	}}
	b, err := json.Marshal(SoftwareInventory(inv, Product{Name: "sandtrail", Vendor: "sandtrail", Version: "test"}))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	c := f.Classes["software_info"]
	if int(m["class_uid"].(float64)) != c.ClassUID || int(m["type_uid"].(float64)) != c.ClassUID*100+int(m["activity_id"].(float64)) {
		t.Fatalf("class_uid, type_uid = %v, %v, want %d and its type", m["class_uid"], m["type_uid"], c.ClassUID)
	}
	check(t, f, "software_info", m, c.Required, c.Constraints)
	if md := m["metadata"].(map[string]any); md["correlation_uid"] != "sess-1" {
		t.Errorf("metadata.correlation_uid = %v, want the session", md["correlation_uid"])
	}
	comps := m["sbom"].(map[string]any)["software_components"].([]any)
	want := []struct {
		algo  float64
		value string
	}{{hashSHA512, "deadbeef"}, {hashSHA256, "deadbeef"}, {hashUnknown, "md5sum"}}
	if len(comps) != len(want) {
		t.Fatalf("%d software components, want %d", len(comps), len(want))
	}
	for i, w := range want {
		h := comps[i].(map[string]any)["hash"].(map[string]any)
		if h["algorithm_id"] != w.algo || h["value"] != w.value {
			t.Errorf("component %d's hash = %v, want algorithm %v, value %s", i, h, w.algo, w.value)
		}
	}
}
