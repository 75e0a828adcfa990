package sigma

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// MaxFileSize is the largest rule file accepted.
const MaxFileSize = 1 << 20

// maxNodes caps the YAML nodes visited in one file, counting every use of
// an alias, so alias bombs fail instead of exploding.
const maxNodes = 100_000

// Logsource is a rule's logsource.
type Logsource struct {
	Product  string
	Category string
	Service  string
}

// Rule is one loaded Sigma rule: a detection rule, or a correlation rule
// (Correlation non-nil).
type Rule struct {
	Title          string
	ID             string
	Name           string
	Status         string
	Description    string
	References     []string
	Tags           []string
	FalsePositives []string
	Level          string
	Author         string
	Date           string
	Modified       string
	Logsource      Logsource
	Fields         []string
	// File is the file the rule was loaded from, as Load was given it.
	File string
	// Correlation is set for a correlation rule.
	Correlation *Correlation

	cat   *category
	sels  []*selection
	cond  node
	corrs []*correlation
	// standalone: the rule raises matches of its own (false for a rule
	// that only feeds correlations that do not ask to generate it).
	standalone bool
}

var (
	uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	dateRE = regexp.MustCompile(`^[0-9]{4}[-/][0-9]{2}[-/][0-9]{2}$`)
	tagRE  = regexp.MustCompile(`^[a-z0-9_-]+\.[a-z0-9._-]+$`)
	nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

var (
	statuses = []string{"stable", "test", "experimental", "deprecated", "unsupported"}
	levels   = []string{"informational", "low", "medium", "high", "critical"}
)

// compiler holds the state of loading one YAML document.
type compiler struct {
	file  string
	r     *Rule
	cat   *category
	errs  []error
	nodes int
	// corr is the raw correlation section, linked once every file is read,
	// and generate the rule's top-level generate attribute.
	corr     *yaml.Node
	generate *yaml.Node
}

func (c *compiler) ruleName() string {
	if c.r == nil {
		return ""
	}
	switch {
	case c.r.Title != "" && c.r.ID != "":
		return fmt.Sprintf("%q (%s)", c.r.Title, c.r.ID)
	case c.r.Title != "":
		return fmt.Sprintf("%q", c.r.Title)
	case c.r.ID != "":
		return "(" + c.r.ID + ")"
	}
	return ""
}

// deref follows an alias, counting the nodes it visits against maxNodes.
func (c *compiler) deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	c.nodes++
	if c.nodes > maxNodes {
		if c.nodes == maxNodes+1 {
			c.errf(0, "", "more than %d YAML nodes (an alias bomb?)", maxNodes)
		}
		return nil
	}
	return n
}

func (c *compiler) scalar(path string, n *yaml.Node) (string, bool) {
	n = c.deref(n)
	if n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode || isNull(n) {
		c.errf(n.Line, path, "must be a string")
		return "", false
	}
	return n.Value, true
}

func (c *compiler) strings(path string, n *yaml.Node) ([]string, bool) {
	n = c.deref(n)
	if n == nil {
		return nil, false
	}
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		return []string{n.Value}, true
	}
	if n.Kind != yaml.SequenceNode {
		c.errf(n.Line, path, "must be a list of strings")
		return nil, false
	}
	var out []string
	for _, x := range n.Content {
		s, ok := c.scalar(path, x)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// mapping returns the key/value pairs of a map node, keys as strings.
func (c *compiler) mapping(path string, n *yaml.Node) ([]string, []*yaml.Node, bool) {
	n = c.deref(n)
	if n == nil {
		return nil, nil, false
	}
	if n.Kind != yaml.MappingNode {
		c.errf(n.Line, path, "must be a map")
		return nil, nil, false
	}
	var keys []string
	var vals []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := c.deref(n.Content[i])
		if k == nil {
			return nil, nil, false
		}
		if k.Kind != yaml.ScalarNode {
			c.errf(k.Line, path, "keys must be strings")
			return nil, nil, false
		}
		if slices.Contains(keys, k.Value) {
			c.errf(k.Line, path, "key %q repeated", k.Value)
			return nil, nil, false
		}
		keys = append(keys, k.Value)
		vals = append(vals, n.Content[i+1])
	}
	return keys, vals, true
}

// ignoredKeys are rule attributes that are read but not used.
var ignoredKeys = []string{"related", "license", "taxonomy", "scope", "regression_tests_path", "simulation"}

// parseDoc reads one YAML document into a rule, or records why not.
func (c *compiler) parseDoc(doc *yaml.Node) {
	r := &Rule{File: c.file, standalone: true}
	c.r = r
	keys, vals, ok := c.mapping("", doc)
	if !ok {
		return
	}
	// Title and id first, so that every later error can name the rule.
	titleBad := c.readTitleAndID(keys, vals)
	detection := c.readAttrs(keys, vals)
	if r.Title == "" && !titleBad {
		c.errf(doc.Line, "title", "missing")
	} else if len(r.Title) > 256 {
		c.errf(doc.Line, "title", "longer than 256 characters")
	}
	if r.ID != "" && !uuidRE.MatchString(r.ID) {
		c.errf(doc.Line, "id", "%q is not a UUID", r.ID)
	}
	c.checkSections(doc, keys, detection)
	r.cat = c.cat
}

// readTitleAndID reads the rule's title and id from its attributes (keys,
// vals), and reports whether the title is there but not a string.
func (c *compiler) readTitleAndID(keys []string, vals []*yaml.Node) (titleBad bool) {
	for i, k := range keys {
		switch k {
		case "title":
			var ok bool
			c.r.Title, ok = c.scalar("title", vals[i])
			titleBad = !ok
		case "id":
			c.r.ID, _ = c.scalar("id", vals[i])
		}
	}
	return titleBad
}

// readAttrs reads the rule's attributes (keys, vals) other than title and
// id: the logsource into the category, the correlation and generate
// sections into the compiler, and returns the detection section (nil
// without one).
func (c *compiler) readAttrs(keys []string, vals []*yaml.Node) (detection *yaml.Node) {
	r := c.r
	for i, k := range keys {
		v := vals[i]
		switch k {
		case "title", "id":
		case "name":
			r.Name, _ = c.scalar(k, v)
			if r.Name != "" && !nameRE.MatchString(r.Name) {
				c.errf(v.Line, k, "%q is not a name (letters, digits, _ . -)", r.Name)
			}
		case "status":
			r.Status = c.oneOf(k, v, statuses)
		case "description":
			r.Description, _ = c.scalar(k, v)
		case "references":
			r.References, _ = c.strings(k, v)
		case "tags":
			r.Tags = c.tags(k, v)
		case "falsepositives":
			r.FalsePositives, _ = c.strings(k, v)
		case "level":
			r.Level = c.oneOf(k, v, levels)
		case "author":
			r.Author, _ = c.scalar(k, v)
		case "date":
			r.Date = c.date(k, v)
		case "modified":
			r.Modified = c.date(k, v)
		case "logsource":
			c.parseLogsource(v)
		case "detection":
			detection = v
		case "fields":
			r.Fields, _ = c.strings(k, v)
		case "correlation":
			c.corr = v
		case "generate":
			c.generate = v
		default:
			if !slices.Contains(ignoredKeys, k) {
				c.errf(v.Line, k, "unknown rule attribute")
			}
		}
	}
	return detection
}

// oneOf reads the attribute k, a string that must be one of allowed.
func (c *compiler) oneOf(k string, v *yaml.Node, allowed []string) string {
	s, _ := c.scalar(k, v)
	if !slices.Contains(allowed, s) {
		c.errf(v.Line, k, "%q is not one of %s", s, strings.Join(allowed, ", "))
	}
	return s
}

// tags reads the tags: a list of namespace.name in lower case.
func (c *compiler) tags(k string, v *yaml.Node) []string {
	tags, _ := c.strings(k, v)
	for _, t := range tags {
		if !tagRE.MatchString(t) {
			c.errf(v.Line, k, "tag %q is not namespace.name in lower case (attack.t1059)", t)
		}
	}
	return tags
}

// date reads the attribute k, a date YYYY-MM-DD or empty.
func (c *compiler) date(k string, v *yaml.Node) string {
	d, _ := c.scalar(k, v)
	if d != "" && !dateRE.MatchString(d) {
		c.errf(v.Line, k, "%q is not a date YYYY-MM-DD", d)
	}
	return d
}

// checkSections checks that the rule has a detection (with a logsource)
// or a correlation, and compiles its detection (nil without one).
func (c *compiler) checkSections(doc *yaml.Node, keys []string, detection *yaml.Node) {
	switch {
	case c.corr != nil && detection != nil:
		c.errf(doc.Line, "", "a rule has detection or correlation, not both")
	case c.generate != nil && c.corr == nil:
		c.errf(c.generate.Line, "generate", "only a correlation rule takes generate")
	case c.corr != nil:
		if slices.Contains(keys, "logsource") {
			c.errf(doc.Line, "logsource", "a correlation rule has no logsource")
		}
	case detection == nil:
		c.errf(doc.Line, "detection", "missing")
	case c.cat == nil:
		if !slices.Contains(keys, "logsource") {
			c.errf(doc.Line, "logsource", "missing")
		}
	default:
		c.parseDetection(detection)
		for _, f := range c.r.Fields {
			if c.cat.fields[f] == nil {
				c.errf(doc.Line, "fields", "unknown field %q for logsource %s/%s", f, c.cat.product, c.cat.name)
			}
		}
	}
}

func (c *compiler) parseLogsource(n *yaml.Node) {
	keys, vals, ok := c.mapping("logsource", n)
	if !ok {
		return
	}
	ls := &c.r.Logsource
	for i, k := range keys {
		s, _ := c.scalar("logsource."+k, vals[i])
		switch k {
		case "product":
			ls.Product = s
		case "category":
			ls.Category = s
		case "service":
			ls.Service = s
		case "definition":
		default:
			c.errf(vals[i].Line, "logsource."+k, "unknown logsource attribute")
			return
		}
	}
	if ls.Service != "" {
		c.errf(n.Line, "logsource.service", "service %q is not supported: sandtrail's logsources are categories (docs/sigma.md)", ls.Service)
		return
	}
	c.cat = findCategory(ls.Product, ls.Category)
	if c.cat == nil {
		c.errf(n.Line, "logsource", "product %q category %q is not supported (docs/sigma.md lists the logsources)", ls.Product, ls.Category)
	}
}

func (c *compiler) parseDetection(n *yaml.Node) {
	keys, vals, ok := c.mapping("detection", n)
	if !ok {
		return
	}
	var cond *yaml.Node
	for i, k := range keys {
		if k == "condition" {
			cond = vals[i]
			continue
		}
		if k == "timeframe" {
			c.errf(vals[i].Line, "detection.timeframe", "timeframe is obsolete Sigma: write a correlation rule")
			return
		}
		if strings.ContainsAny(k, " ()|") || k == "" {
			c.errf(vals[i].Line, "detection."+k, "not a search identifier name")
			return
		}
		v := c.deref(vals[i])
		if v == nil {
			return
		}
		s := c.compileSelection(k, v)
		if s == nil {
			return
		}
		c.r.sels = append(c.r.sels, s)
	}
	if cond == nil {
		c.errf(n.Line, "detection.condition", "missing")
		return
	}
	conds, ok := c.strings("detection.condition", cond)
	if !ok {
		return
	}
	if len(conds) == 0 {
		c.errf(cond.Line, "detection.condition", "empty")
		return
	}
	names := make([]string, len(c.r.sels))
	for i, s := range c.r.sels {
		names[i] = s.name
	}
	var or orNode
	for _, s := range conds {
		x, err := parseCondition(s, names)
		if err != nil {
			c.errf(cond.Line, "detection.condition", "%q: %v", s, err)
			return
		}
		or = append(or, x)
	}
	if len(or) == 1 {
		c.r.cond = or[0]
	} else {
		c.r.cond = or
	}
}

// parseFile reads every YAML document of one file.
func parseFile(name string, data []byte) ([]*Rule, []*compiler, []error) {
	if len(data) > MaxFileSize {
		return nil, nil, []error{&Error{File: name, Msg: fmt.Sprintf("larger than %d bytes", MaxFileSize)}}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var rules []*Rule
	var cs []*compiler
	var errs []error
	nodes := 0
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, &Error{File: name, Msg: fmt.Sprintf("parsing YAML: %v", err)})
			break
		}
		if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
			continue
		}
		root := doc.Content[0]
		if root.Kind == yaml.ScalarNode && isNull(root) {
			continue // an empty document, as after a trailing ---
		}
		c := &compiler{file: name, nodes: nodes}
		c.parseDoc(root)
		nodes = c.nodes
		if len(c.errs) > 0 {
			errs = append(errs, c.errs...)
			if nodes > maxNodes {
				break
			}
			continue
		}
		rules = append(rules, c.r)
		cs = append(cs, c)
	}
	return rules, cs, errs
}

// Load reads rules from fsys: the files named, or when none is named every
// .yml and .yaml file beneath the root. Every problem of every rule is
// reported, each an *Error naming the file, the rule and the attribute,
// joined with errors.Join; a Set is returned only when there are none.
func Load(fsys fs.FS, names ...string) (*Set, error) {
	return LoadSources(Source{FS: fsys, Names: names})
}

// Source is where some of a Set's rules are read from: the files Names
// of FS, or every .yml and .yaml file beneath its root when Names is
// empty. Label, when set, is put before each name in errors and in
// Rule.File ("builtin:download_to_shell.yml").
type Source struct {
	FS    fs.FS
	Names []string
	Label string
}

// LoadSources reads the rules of every source into one Set, so that a
// correlation of one source may name a rule of another; it reports errors
// as Load does.
func LoadSources(srcs ...Source) (*Set, error) {
	var files []file
	for _, src := range srcs {
		fs, err := src.read()
		if err != nil {
			return nil, err
		}
		files = append(files, fs...)
	}
	return build(files)
}

func (src Source) read() ([]file, error) {
	names := src.Names
	if len(names) == 0 {
		err := fs.WalkDir(src.FS, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && (path.Ext(p) == ".yml" || path.Ext(p) == ".yaml") {
				names = append(names, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing rules: %w", err)
		}
	}
	files := make([]file, 0, len(names))
	for _, n := range names {
		data, err := readLimited(src.FS, n)
		if err != nil {
			return nil, err
		}
		files = append(files, file{src.Label + n, data})
	}
	return files, nil
}

// LoadFiles reads rules from files on disk, as Load does from an fs.FS.
func LoadFiles(paths ...string) (*Set, error) {
	files := make([]file, 0, len(paths))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("reading rules: %w", err)
		}
		data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading rules %s: %w", p, err)
		}
		files = append(files, file{p, data})
	}
	return build(files)
}

// Parse loads the rules of one file's bytes; name is used in errors.
func Parse(name string, data []byte) (*Set, error) { return build([]file{{name, data}}) }

type file struct {
	name string
	data []byte
}

func readLimited(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("reading rules: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading rules %s: %w", name, err)
	}
	return data, nil
}
