package policies

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/viper"
	yaml "go.yaml.in/yaml/v3"
)

// MaxFileSize is the largest policy file accepted.
const MaxFileSize = 1 << 20

// maxNodes caps the YAML nodes visited while checking a file's structure,
// counting every use of an alias, so alias bombs fail instead of exploding.
const maxNodes = 100_000

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML returns the text of the embedded default policy.
func DefaultYAML() []byte { return bytes.Clone(defaultYAML) }

// Default returns the embedded default policy (policies/default.yaml).
func Default() *Policy {
	p, err := Parse("default.yaml", defaultYAML)
	if err != nil {
		// The default is checked by tests; failing here is a build defect.
		panic(fmt.Sprintf("policy: embedded default.yaml is invalid: %v", err))
	}
	return p
}

// Load reads and validates the policy file at path. An empty path loads the
// embedded default. Problems with the file's contents are returned as Errors;
// failing to read it is returned as a wrapped I/O error.
func Load(path string) (*Policy, error) {
	if path == "" {
		return Default(), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading policy: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading policy %s: %w", path, err)
	}
	return Parse(filepath.Base(path), data)
}

// Parse decodes and validates a policy. name is used in error messages. It
// returns Errors listing every problem found with its line and field path:
// YAML syntax errors, unknown fields, values of the wrong type, and then
// invalid values. It never panics, whatever data holds.
func Parse(name string, data []byte) (*Policy, error) {
	c := &errs{}
	if len(data) > MaxFileSize {
		c.list = append(c.list, &FieldError{Field: "(file)", Msg: fmt.Sprintf("larger than %d bytes", MaxFileSize)})
		return nil, c.result(name, nil)
	}
	lines := map[string]int{}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		c.list = append(c.list, syntaxError(err))
		return nil, c.result(name, nil)
	}
	w := &walker{c: c, lines: lines}
	if len(doc.Content) > 0 {
		w.walk(doc.Content[0], policyType, "")
	}
	if len(c.list) > 0 {
		return nil, c.result(name, lines)
	}

	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		c.list = append(c.list, &FieldError{Field: "(document)", Msg: fmt.Sprintf("reading: %v", err)})
		return nil, c.result(name, lines)
	}
	var p Policy
	if err := v.UnmarshalExact(&p); err != nil {
		// The walk above mirrors what mapstructure checks; reaching here
		// means it missed something, so report viper's own words.
		c.list = append(c.list, &FieldError{Field: "(document)", Msg: fmt.Sprintf("decoding: %v", err)})
		return nil, c.result(name, lines)
	}
	if _, ce := compile(&p); len(ce.list) > 0 {
		return nil, ce.result(name, lines)
	}
	return &p, nil
}

var yamlLine = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// yamlParserProblems are the problems that yaml's parser (as opposed to its
// scanner) reports. It numbers their lines from 0, at the start of the
// enclosing construct, so they get one added.
var yamlParserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

func syntaxError(err error) *FieldError {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return &FieldError{Msg: "syntax error: " + err.Error()}
	}
	line, _ := strconv.Atoi(m[1])
	if yamlParserProblems[m[2]] {
		line++
	}
	return &FieldError{Line: line, Msg: "syntax error: " + m[2]}
}

var policyType = reflect.TypeFor[Policy]()

// walker checks a YAML node tree against the Policy type: mappings for
// structs and maps, sequences for slices, scalars of the right kind for
// strings, booleans and integers, no unknown or repeated keys. It records
// the line of every field path it passes, for error messages.
type walker struct {
	c     *errs
	lines map[string]int
	nodes int
}

func (w *walker) fail(n *yaml.Node, field, format string, args ...any) {
	w.c.list = append(w.c.list, &FieldError{Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!bool":
		return "a boolean"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!null":
		return "null"
	case "!!str":
		return "a string"
	}
	return "a value tagged " + strconv.Quote(n.Tag)
}

func (w *walker) walk(n *yaml.Node, t reflect.Type, field string) {
	w.nodes++
	if w.nodes > maxNodes {
		if w.nodes == maxNodes+1 {
			w.fail(n, orDocument(field), "too many nodes (aliases expand to more than %d)", maxNodes)
		}
		return
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias != nil {
			w.walk(n.Alias, t, field)
		}
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an absent value: the zero value.
	}
	switch t.Kind() {
	case reflect.Struct:
		w.walkStruct(n, t, field)
	case reflect.Map:
		w.walkMap(n, t, field)
	case reflect.Slice:
		w.walkSlice(n, t, field)
	case reflect.String, reflect.Bool, reflect.Int:
		w.checkScalar(n, t, field)
	default:
		w.fail(n, field, "unsupported field type %s", t)
	}
}

// walkStruct checks a mapping against the fields of struct type t.
func (w *walker) walkStruct(n *yaml.Node, t reflect.Type, field string) {
	if n.Kind != yaml.MappingNode {
		w.fail(n, orDocument(field), "expected a mapping, got %s", kindName(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			w.fail(k, orDocument(field), "a key must be a plain string")
			continue
		}
		key := strings.ToLower(k.Value)
		if key == "" {
			w.fail(k, orDocument(field), "empty key")
			continue
		}
		f := join(field, key)
		if first, dup := seen[key]; dup {
			w.fail(k, f, "repeated key (first at line %d)", first)
			continue
		}
		seen[key] = k.Line
		sf, ok := fieldByTag(t, key)
		if !ok {
			if key == "<<" {
				w.fail(k, orDocument(field), "merge keys (<<) are not supported")
				continue
			}
			w.fail(k, f, "unknown field (known: %s)", strings.Join(tagNames(t), ", "))
			continue
		}
		w.lines[f] = k.Line
		w.walk(val, sf.Type, f)
	}
}

// walkMap checks a mapping with plain-name keys against map type t.
func (w *walker) walkMap(n *yaml.Node, t reflect.Type, field string) {
	if n.Kind != yaml.MappingNode {
		w.fail(n, field, "expected a mapping, got %s", kindName(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" || strings.ContainsAny(k.Value, ".[]") {
			w.fail(k, field, "a key must be a plain name without dots or brackets")
			continue
		}
		key := strings.ToLower(k.Value)
		f := join(field, key)
		if first, dup := seen[key]; dup {
			w.fail(k, f, "repeated key (first at line %d)", first)
			continue
		}
		seen[key] = k.Line
		w.lines[f] = k.Line
		w.walk(val, t.Elem(), f)
	}
}

// walkSlice checks a list against slice type t.
func (w *walker) walkSlice(n *yaml.Node, t reflect.Type, field string) {
	if n.Kind != yaml.SequenceNode {
		w.fail(n, field, "expected a list, got %s", kindName(n))
		return
	}
	for i, item := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		w.lines[f] = item.Line
		w.walk(item, t.Elem(), f)
	}
}

// checkScalar checks a scalar against string, bool or int type t.
func (w *walker) checkScalar(n *yaml.Node, t reflect.Type, field string) {
	switch t.Kind() {
	case reflect.String:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float") {
			w.fail(n, field, "expected a string, got %s", kindName(n))
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			w.fail(n, field, "expected true or false, got %s", kindName(n))
		}
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			w.fail(n, field, "expected an integer, got %s", kindName(n))
			return
		}
		if _, err := strconv.ParseInt(n.Value, 0, 32); err != nil {
			w.fail(n, field, "integer %q out of range", n.Value)
		}
	}
}

func orDocument(field string) string {
	if field == "" {
		return "(document)"
	}
	return field
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ","); tag == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tagNames(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("mapstructure"), ",")
		out = append(out, tag)
	}
	slices.Sort(out)
	return out
}

// Marshal returns p as YAML, in the same field names a policy file uses.
func Marshal(p *Policy) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encoding policy: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding policy: %w", err)
	}
	return b.Bytes(), nil
}
