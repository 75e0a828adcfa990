package ocsf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

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
		sub, ok := v.(map[string]any)
		obj := objectOf[k]
		if !ok || obj == "" {
			continue
		}
		of, ok := f.Objects[obj]
		if !ok {
			t.Fatalf("no facts for object %s", obj)
		}
		check(t, f, where+"."+k, sub, of.Required, of.Constraints)
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
