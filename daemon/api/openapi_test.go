package api_test

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sandtrail/sandtrail/daemon/api"
)

// TestOpenAPIMatchesServer checks docs/api.openapi.yaml against the
// server: every route is documented and nothing else is, and each body's
// schema has exactly its Go type's JSON fields.
func TestOpenAPIMatchesServer(t *testing.T) {
	b, err := os.ReadFile("../../docs/api.openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]map[string]any `yaml:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for m := range ops {
			if m != "parameters" {
				documented = append(documented, strings.ToUpper(m)+" "+path)
			}
		}
	}
	slices.Sort(documented)
	routes := slices.Sorted(slices.Values(api.Routes))
	if !slices.Equal(documented, routes) {
		t.Errorf("documented routes %v, the server's %v", documented, routes)
	}
	for name, typ := range map[string]reflect.Type{
		"Post": reflect.TypeFor[api.Post](), "Posted": reflect.TypeFor[api.Posted](),
		"Facts": reflect.TypeFor[api.Facts](), "ToolPolicy": reflect.TypeFor[api.ToolPolicy](),
	} {
		var fields []string
		for f := range typ.Fields() {
			n, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			fields = append(fields, n)
		}
		var props []string
		for p := range doc.Components.Schemas[name].Properties {
			props = append(props, p)
		}
		slices.Sort(fields)
		slices.Sort(props)
		if !slices.Equal(fields, props) {
			t.Errorf("schema %s has %v, Go %v has %v", name, props, typ, fields)
		}
	}
}
