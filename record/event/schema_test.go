package event_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const (
	schemaPath = "../../docs/event.schema.json"
	schemaDoc  = "../../docs/schema.md"
)

// loadSchema reads docs/event.schema.json.
func loadSchema(t testing.TB) map[string]any {
	t.Helper()
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatalf("reading schema: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var s map[string]any
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("decoding schema: %v", err)
	}
	return s
}

// jsonField is one field of a Go struct as encoding/json sees it.
type jsonField struct {
	name     string
	typ      reflect.Type
	optional bool // omitempty or omitzero: absent when zero
}

func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			// encoding/json promotes an embedded struct's fields.
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		optional := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
		out = append(out, jsonField{name: name, typ: f.Type, optional: optional})
	}
	return out
}

var timeType = reflect.TypeFor[time.Time]()

// checkType asserts that schema s describes Go type typ, recursively, and
// returns the JSON field names seen (with their paths) for the docs check.
func checkType(t *testing.T, path string, typ reflect.Type, s map[string]any) []string {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	wantType := ""
	switch {
	case typ == timeType:
		wantType = "string"
		if s["format"] != "date-time" {
			t.Errorf("%s: format = %v, want date-time", path, s["format"])
		}
	case typ.Kind() == reflect.String:
		wantType = "string"
	case typ.Kind() == reflect.Bool:
		wantType = "boolean"
	case typ.Kind() == reflect.Float32 || typ.Kind() == reflect.Float64:
		wantType = "number"
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Int64:
		wantType = "integer"
	case typ.Kind() >= reflect.Uint && typ.Kind() <= reflect.Uint64:
		wantType = "integer"
		if fmt.Sprint(s["minimum"]) != "0" {
			t.Errorf("%s: minimum = %v, want 0 for %v", path, s["minimum"], typ)
		}
		if typ.Bits() < 64 {
			want := fmt.Sprint(uint64(1)<<typ.Bits() - 1)
			if fmt.Sprint(s["maximum"]) != want {
				t.Errorf("%s: maximum = %v, want %s for %v", path, s["maximum"], want, typ)
			}
		}
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Uint8:
		// encoding/json writes []byte as a base64 string.
		wantType = "string"
		if s["contentEncoding"] != "base64" {
			t.Errorf("%s: contentEncoding = %v, want base64 for %v", path, s["contentEncoding"], typ)
		}
	case typ.Kind() == reflect.Slice:
		wantType = "array"
	case typ.Kind() == reflect.Struct:
		wantType = "object"
	default:
		t.Fatalf("%s: Go type %v has no JSON Schema mapping in this test", path, typ)
	}
	if s["type"] != wantType {
		t.Errorf("%s: type = %v, want %s (Go %v)", path, s["type"], wantType, typ)
	}
	var names []string
	switch {
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Uint8:
	case typ.Kind() == reflect.Slice:
		items, ok := s["items"].(map[string]any)
		if !ok {
			t.Errorf("%s: no items schema", path)
			return nil
		}
		names = append(names, checkType(t, path+"[]", typ.Elem(), items)...)
	case typ.Kind() == reflect.Struct && typ != timeType:
		if s["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties = %v, want false", path, s["additionalProperties"])
		}
		props, _ := s["properties"].(map[string]any)
		var required []string
		for _, r := range asSlice(s["required"]) {
			required = append(required, r.(string))
		}
		var goNames, wantRequired []string
		for _, f := range jsonFields(typ) {
			goNames = append(goNames, f.name)
			if !f.optional {
				wantRequired = append(wantRequired, f.name)
			}
			names = append(names, f.name)
			ps, ok := props[f.name].(map[string]any)
			if !ok {
				t.Errorf("%s: Go field %q missing from the schema", path, f.name)
				continue
			}
			if _, ok := ps["description"].(string); !ok {
				t.Errorf("%s.%s: no description", path, f.name)
			}
			names = append(names, checkType(t, path+"."+f.name, f.typ, ps)...)
		}
		for p := range props {
			if !slices.Contains(goNames, p) {
				t.Errorf("%s: schema property %q is not a field of Go %v", path, p, typ)
			}
		}
		sort.Strings(required)
		sort.Strings(wantRequired)
		if !slices.Equal(required, wantRequired) {
			t.Errorf("%s: required = %v, want %v (the fields without omitempty)", path, required, wantRequired)
		}
	}
	return names
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// TestSchemaMatchesType walks the Event type by reflection and asserts that
// docs/event.schema.json has exactly its properties at every level, with
// matching types and required lists, and that docs/schema.md names every
// field.
func TestSchemaMatchesType(t *testing.T) {
	s := loadSchema(t)
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v, want draft 2020-12", s["$schema"])
	}
	names := checkType(t, "event", reflect.TypeFor[event.Event](), s)
	if len(names) < 50 {
		t.Fatalf("walked %d field names, want the whole type", len(names))
	}

	doc, err := os.ReadFile(schemaDoc)
	if err != nil {
		t.Fatalf("reading schema doc: %v", err)
	}
	for _, n := range names {
		if !bytes.Contains(doc, []byte("`"+n+"`")) {
			t.Errorf("docs/schema.md does not mention field `%s`", n)
		}
	}
	for _, k := range event.Kinds {
		if !bytes.Contains(doc, []byte("`"+k+"`")) {
			t.Errorf("docs/schema.md does not mention kind `%s`", k)
		}
	}
	for _, src := range event.Sources {
		if !bytes.Contains(doc, []byte("`"+string(src)+"`")) {
			t.Errorf("docs/schema.md does not describe source `%s`", src)
		}
	}
}

// TestSchemaEnums checks that the closed sets in the schema agree with the
// Go constants where the package defines them.
func TestSchemaEnums(t *testing.T) {
	s := loadSchema(t)
	props := s["properties"].(map[string]any)
	var got []string
	for _, v := range asSlice(props["source"].(map[string]any)["enum"]) {
		got = append(got, v.(string))
	}
	var want []string
	for _, src := range event.Sources {
		want = append(want, string(src))
	}
	if !slices.Equal(got, want) {
		t.Errorf("source enum = %v, want %v", got, want)
	}
	if v := asSlice(props["v"].(map[string]any)["enum"]); len(v) != 1 || fmt.Sprint(v[0]) != fmt.Sprint(event.SchemaVersion) {
		t.Errorf("v enum = %v, want [%d]", v, event.SchemaVersion)
	}
	// The kind pattern accepts exactly the categories Validate knows.
	re := regexp.MustCompile(props["kind"].(map[string]any)["pattern"].(string))
	for _, c := range event.Categories() {
		if !re.MatchString(c+".x") && c != "alert" {
			t.Errorf("kind pattern rejects category %q", c)
		}
	}
	if re.MatchString("bogus.x") {
		t.Errorf("kind pattern accepts unknown category bogus")
	}
}

// validate checks instance v against schema s for the subset of JSON Schema
// that docs/event.schema.json uses: type, properties, required,
// additionalProperties, items, enum, pattern, minimum, maximum and format
// date-time. Any other keyword is an error, so the schema cannot silently
// rely on something this validator ignores.
func validate(s map[string]any, v any, path string) error {
	for k := range s {
		switch k {
		case "$schema", "$id", "title", "description",
			"type", "properties", "required", "additionalProperties", "items", "enum", "pattern", "minimum", "maximum", "format":
		default:
			return fmt.Errorf("%s: schema keyword %q not supported by this validator", path, k)
		}
	}
	if typ, ok := s["type"].(string); ok {
		if err := checkJSONType(typ, v); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(v) && reflect.TypeOf(e) == reflect.TypeOf(v) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s: %v is not one of %v", path, v, enum)
		}
	}
	if p, ok := s["pattern"].(string); ok {
		str, _ := v.(string)
		if !regexp.MustCompile(p).MatchString(str) {
			return fmt.Errorf("%s: %q does not match %s", path, str, p)
		}
	}
	if f, ok := s["format"].(string); ok {
		if f != "date-time" {
			return fmt.Errorf("%s: format %q not supported", path, f)
		}
		if _, err := time.Parse(time.RFC3339Nano, v.(string)); err != nil {
			return fmt.Errorf("%s: not a date-time: %v", path, err)
		}
	}
	if n, ok := v.(json.Number); ok {
		x, _ := new(big.Float).SetString(n.String())
		if m, ok := s["minimum"].(json.Number); ok {
			lim, _ := new(big.Float).SetString(m.String())
			if x.Cmp(lim) < 0 {
				return fmt.Errorf("%s: %s is below minimum %s", path, n, m)
			}
		}
		if m, ok := s["maximum"].(json.Number); ok {
			lim, _ := new(big.Float).SetString(m.String())
			if x.Cmp(lim) > 0 {
				return fmt.Errorf("%s: %s is above maximum %s", path, n, m)
			}
		}
	}
	if obj, ok := v.(map[string]any); ok {
		props, _ := s["properties"].(map[string]any)
		for _, r := range asSlice(s["required"]) {
			if _, ok := obj[r.(string)]; !ok {
				return fmt.Errorf("%s: missing required property %q", path, r)
			}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if s["additionalProperties"] == false {
					return fmt.Errorf("%s: property %q not allowed", path, k)
				}
				continue
			}
			if err := validate(ps, obj[k], path+"."+k); err != nil {
				return err
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if items, ok := s["items"].(map[string]any); ok {
			for i, it := range arr {
				if err := validate(items, it, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkJSONType(typ string, v any) error {
	ok := false
	switch typ {
	case "object":
		_, ok = v.(map[string]any)
	case "array":
		_, ok = v.([]any)
	case "string":
		_, ok = v.(string)
	case "boolean":
		_, ok = v.(bool)
	case "number":
		_, ok = v.(json.Number)
	case "integer":
		if n, isNum := v.(json.Number); isNum {
			x, _, err := big.ParseFloat(n.String(), 10, 200, big.ToNearestEven)
			ok = err == nil && x.IsInt()
		}
	case "null":
		ok = v == nil
	default:
		return fmt.Errorf("type %q not supported", typ)
	}
	if !ok {
		return fmt.Errorf("%s is not of type %s", describe(v), typ)
	}
	return nil
}

func describe(v any) string {
	b, _ := json.Marshal(v)
	return truncateForMsg(string(b))
}

func truncateForMsg(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func decodeInstance(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding instance: %v", err)
	}
	return v
}

// TestExamplesGolden writes every example event to testdata/<kind>.json (with
// -update) or compares it to the file, then validates every
// testdata/*.json against the schema and through Unmarshal.
func TestExamplesGolden(t *testing.T) {
	ex := examples()
	for _, k := range event.Kinds {
		if ex[k] == nil {
			t.Errorf("no example for kind %q", k)
		}
	}
	for kind, e := range ex {
		t.Run(kind, func(t *testing.T) {
			if !slices.Contains(event.Kinds, kind) {
				t.Errorf("example kind %q is not in event.Kinds", kind)
			}
			b, err := event.Marshal(e)
			if err != nil {
				t.Fatalf("Marshal(%s) error: %v", kind, err)
			}
			var ind bytes.Buffer
			if err := json.Indent(&ind, b, "", "  "); err != nil {
				t.Fatal(err)
			}
			ind.WriteByte('\n')
			golden := filepath.Join("testdata", kind+".json")
			if *update {
				if err := os.WriteFile(golden, ind.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				// Each golden event doubles as a seed for FuzzUnmarshal.
				seed := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
				if err := os.WriteFile(filepath.Join("testdata", "fuzz", "FuzzUnmarshal", "valid-"+kind), []byte(seed), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("reading golden (run with -update to create): %v", err)
			}
			if !bytes.Equal(ind.Bytes(), want) {
				t.Errorf("Marshal(%s) =\n%s\nwant (from %s)\n%s", kind, ind.Bytes(), golden, want)
			}
		})
	}

	s := loadSchema(t)
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) < len(event.Kinds) {
		t.Fatalf("found %d golden files (err %v), want at least %d", len(files), err, len(event.Kinds))
	}
	for _, f := range files {
		t.Run("schema/"+filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := validate(s, decodeInstance(t, b), "event"); err != nil {
				t.Errorf("validate(%s) = %v, want nil", f, err)
			}
			if _, err := event.Unmarshal(b); err != nil {
				t.Errorf("Unmarshal(%s) error: %v", f, err)
			}
		})
	}
}

// TestSchemaDocExamples checks that every complete event shown in
// docs/schema.md (```json blocks) is valid by the schema and by Unmarshal.
func TestSchemaDocExamples(t *testing.T) {
	doc, err := os.ReadFile(schemaDoc)
	if err != nil {
		t.Fatalf("reading schema doc: %v", err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) < 3 {
		t.Fatalf("docs/schema.md has %d json examples, want at least 3", len(blocks))
	}
	s := loadSchema(t)
	for i, m := range blocks {
		if err := validate(s, decodeInstance(t, m[1]), "event"); err != nil {
			t.Errorf("example %d: validate = %v, want nil", i, err)
		}
		if _, err := event.Unmarshal(m[1]); err != nil {
			t.Errorf("example %d: Unmarshal error: %v", i, err)
		}
	}
}

// TestValidatorRejects makes sure the tiny validator can fail: each broken
// variant of a valid event must be rejected.
func TestValidatorRejects(t *testing.T) {
	s := loadSchema(t)
	good, err := event.Marshal(examples()["pkg.fetch"])
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(s, decodeInstance(t, good), "event"); err != nil {
		t.Fatalf("validate(good) = %v, want nil", err)
	}
	tests := []struct {
		name   string
		edit   func(m map[string]any)
		errHas string
	}{
		{"unknown top-level field", func(m map[string]any) { m["extra"] = "x" }, `property "extra" not allowed`},
		{"unknown nested field", func(m map[string]any) { m["pkg"].(map[string]any)["sha"] = "x" }, `property "sha" not allowed`},
		{"missing required", func(m map[string]any) { delete(m, "kind") }, `missing required property "kind"`},
		{"missing nested required", func(m map[string]any) { delete(m["pkg"].(map[string]any), "name") }, `missing required property "name"`},
		{"bad source", func(m map[string]any) { m["source"] = "agent" }, "is not one of"},
		{"bad verdict", func(m map[string]any) { m["pkg"].(map[string]any)["verdict"] = "allowed" }, "is not one of"},
		{"bad version", func(m map[string]any) { m["v"] = json.Number("2") }, "is not one of"},
		{"string for integer", func(m map[string]any) { m["seq"] = "151" }, "is not of type integer"},
		{"fraction for integer", func(m map[string]any) { m["seq"] = json.Number("1.5") }, "is not of type integer"},
		{"negative unsigned", func(m map[string]any) { m["seq"] = json.Number("-1") }, "below minimum"},
		{"port out of range", func(m map[string]any) {
			m["net"] = map[string]any{"op": "connect", "dst_port": json.Number("65536")}
		}, "above maximum"},
		{"bad kind", func(m map[string]any) { m["kind"] = "pkg install" }, "does not match"},
		{"bad ts", func(m map[string]any) { m["ts"] = "yesterday" }, "not a date-time"},
		{"bool for object", func(m map[string]any) { m["pkg"] = true }, "is not of type object"},
		{"bad array item", func(m map[string]any) {
			m["alert"] = map[string]any{"rule_id": "r", "title": "t", "level": "high", "refs": []any{"x"}}
		}, "alert.refs[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decodeInstance(t, good).(map[string]any)
			tt.edit(m)
			err := validate(s, m, "event")
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("validate(%s) = %v, want error containing %q", tt.name, err, tt.errHas)
			}
		})
	}
}
