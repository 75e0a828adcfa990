package pip

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandtrail/sandtrail/shims"
)

// Options are the index options that argv, the environment and
// requirements files give an install.
type Options struct {
	// IndexURL is the last --index-url (-i) given, "" for none.
	IndexURL string
	// ExtraIndexURLs and FindLinks are every --extra-index-url and
	// --find-links (-f) given, in order, with where they were read.
	ExtraIndexURLs []Located
	FindLinks      []Located
	NoIndex        bool
	// Constraints are the requirements of -c files, which limit versions
	// but ask for nothing.
	Constraints []shims.Request
}

// Located is an option's value and where it was read ("argv",
// "requirements.txt:3").
type Located struct{ Value, Origin string }

// maxDepth caps -r and -c nesting.
const maxDepth = 32

var (
	commentRe  = shims.LazyRegexp(`(^|\s+)#.*$`)
	envVarRe   = shims.LazyRegexp(`\$\{([A-Z0-9_]+)\}`)
	nameRe     = shims.LazyRegexp(`^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(\[[^\]]*\])?\s*`)
	schemeRe   = shims.LazyRegexp(`^(?:[A-Za-z][A-Za-z0-9+.-]*://|(?i:git|hg|svn|bzr)\+)`)
	archiveRe  = shims.LazyRegexp(`(?i)\.(?:whl|zip|tar\.gz|tgz|tar|tar\.bz2|tbz|tar\.xz|txz)$`)
	eggRe      = shims.LazyRegexp(`[#&]egg=([A-Za-z0-9._-]+)`)
	ErrURLFile = errors.New("pip: a requirements file at a URL cannot be checked")
)

// reqParser reads requirements files, following -r and -c.
type reqParser struct {
	open   func(string) ([]byte, error)
	getenv func(string) string
	opts   Options
	reqs   []shims.Request
	seen   map[string]int
}

// ParseRequirements reads the requirements file name (data is its
// content) as pip does: line continuations, comments, ${VAR} expansion
// with getenv, options lines (-r, -c, -e, -i, --extra-index-url, -f,
// --no-index; per-requirement --hash and the like are skipped) and
// requirement lines. Nested -r and -c files are read with open, their
// paths relative to the including file. It returns the requests, the
// options, and an error when a file cannot be read or is at an http(s)
// URL (ErrURLFile), which the shim cannot check.
func ParseRequirements(name string, data []byte, open func(string) ([]byte, error), getenv func(string) string) ([]shims.Request, Options, error) {
	p := &reqParser{open: open, getenv: getenv, seen: map[string]int{}}
	if p.getenv == nil {
		p.getenv = func(string) string { return "" }
	}
	err := p.parse(name, data, false, 0)
	return p.reqs, p.opts, err
}

func (p *reqParser) file(name string, constraint bool, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("reading %s: requirements files nested deeper than %d", name, maxDepth)
	}
	if p.seen[name] > 0 {
		// pip would recurse for ever; one read says all it would.
		return nil
	}
	data, err := p.open(name)
	if err != nil {
		return fmt.Errorf("reading requirements file: %w", err)
	}
	return p.parse(name, data, constraint, depth)
}

func (p *reqParser) parse(name string, data []byte, constraint bool, depth int) error {
	p.seen[name]++
	for _, ln := range logicalLines(string(data)) {
		line := commentRe().ReplaceAllString(ln.text, "")
		line = envVarRe().ReplaceAllStringFunc(line, func(m string) string { return p.getenv(m[2 : len(m)-1]) })
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		origin := filepath.Base(name) + ":" + strconv.Itoa(ln.n)
		if err := p.line(name, line, origin, constraint, depth); err != nil {
			return err
		}
	}
	return nil
}

type logical struct {
	text string
	n    int
}

// logicalLines joins lines ending in a backslash with the next, as pip
// does; n is the number of the first.
func logicalLines(s string) []logical {
	var out []logical
	var cur strings.Builder
	start := 0
	for i, l := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(l, `\`) {
			cur.WriteString(strings.TrimSuffix(l, `\`))
			continue
		}
		cur.WriteString(l)
		out = append(out, logical{cur.String(), start})
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, logical{cur.String(), start})
	}
	return out
}

// line reads one logical line: a requirement, then its options, or an
// options line.
func (p *reqParser) line(name, line, origin string, constraint bool, depth int) error {
	toks := strings.Fields(line)
	n := 0
	for n < len(toks) && !strings.HasPrefix(toks[n], "-") {
		n++
	}
	if n > 0 {
		r := parseRequirement(strings.Join(toks[:n], " "))
		r.Origin = origin
		p.add(r, constraint)
	}
	opts := parseArgs(toks[n:], 0, true)
	for _, o := range opts.opts {
		if err := p.option(name, o, origin, constraint, depth); err != nil {
			return err
		}
	}
	for _, a := range opts.args {
		// Arguments after the options: pip reads only the first
		// token group as a requirement, but keep any as a request.
		r := parseRequirement(a)
		r.Origin = origin
		p.add(r, constraint)
	}
	return nil
}

func (p *reqParser) add(r shims.Request, constraint bool) {
	if constraint {
		p.opts.Constraints = append(p.opts.Constraints, r)
		return
	}
	p.reqs = append(p.reqs, r)
}

func (p *reqParser) option(name string, o opt, origin string, constraint bool, depth int) error {
	switch o.name {
	case "requirement", "constraint":
		path, err := nestedPath(name, o.value)
		if err != nil {
			return err
		}
		return p.file(path, constraint || o.name == "constraint", depth+1)
	case "editable":
		r := editable(o.value)
		r.Origin = origin
		p.add(r, constraint)
	default:
		applyIndexOption(&p.opts, o, origin)
	}
	return nil
}

// applyIndexOption records an index option.
func applyIndexOption(opts *Options, o opt, origin string) {
	switch o.name {
	case "index-url":
		opts.IndexURL = o.value
	case "extra-index-url":
		opts.ExtraIndexURLs = append(opts.ExtraIndexURLs, Located{o.value, origin})
	case "find-links":
		opts.FindLinks = append(opts.FindLinks, Located{o.value, origin})
	case "no-index":
		opts.NoIndex = true
	}
}

// nestedPath is the path of a -r or -c file named in file from.
func nestedPath(from, ref string) (string, error) {
	low := strings.ToLower(ref)
	if strings.HasPrefix(low, "http://") || strings.HasPrefix(low, "https://") {
		return "", fmt.Errorf("reading %s: %w", ref, ErrURLFile)
	}
	if rest, ok := strings.CutPrefix(ref, "file://"); ok {
		ref = rest
	}
	if filepath.IsAbs(ref) || from == "" {
		return ref, nil
	}
	return filepath.Join(filepath.Dir(from), ref), nil
}

// editable is the request of -e X: a path or VCS URL, named by #egg=.
func editable(v string) shims.Request {
	r := shims.Request{Source: v}
	if m := eggRe().FindStringSubmatch(v); m != nil {
		r.Name = m[1]
	}
	return r
}

// parseRequirement reads a requirement as pip's install_req_from_line
// does: a URL or path (Source), "name @ url", or a PEP 508 name with
// extras, specifier and markers.
func parseRequirement(s string) shims.Request {
	req, _, _ := strings.Cut(s, ";")
	req = strings.TrimSpace(req)
	if schemeRe().MatchString(req) {
		r := shims.Request{Source: req}
		if m := eggRe().FindStringSubmatch(req); m != nil {
			r.Name = m[1]
		}
		return r
	}
	m := nameRe().FindStringSubmatch(req)
	looksPath := strings.ContainsAny(req, `/\`) || strings.HasPrefix(req, ".") || archiveRe().MatchString(req)
	if m == nil || (looksPath && !strings.Contains(req, "@")) {
		return shims.Request{Source: req}
	}
	name, rest := m[1], strings.TrimSpace(req[len(m[0]):])
	if u, ok := strings.CutPrefix(rest, "@"); ok {
		return shims.Request{Name: name, Source: strings.TrimSpace(u)}
	}
	spec := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(rest, "("), ")"))
	if !specRe().MatchString(spec) {
		// Not a specifier pip would accept: keep it all as the source,
		// so the request is not lost.
		return shims.Request{Source: req}
	}
	r := shims.Request{Name: name, Spec: spec}
	r.Exact = exact(spec)
	return r
}

var specRe = shims.LazyRegexp(`^(?:\s*(?:===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+\s*(?:,|$))*$`)

// exact is the version a specifier pins: ==X without a wildcard, or
// ===X.
func exact(spec string) string {
	if strings.Contains(spec, ",") {
		return ""
	}
	s := strings.TrimSpace(spec)
	if v, ok := strings.CutPrefix(s, "==="); ok {
		return strings.TrimSpace(v)
	}
	if v, ok := strings.CutPrefix(s, "=="); ok && !strings.Contains(v, "*") {
		return strings.TrimSpace(v)
	}
	return ""
}

// normalize is PEP 503's normal form of a name.
func normalize(name string) string {
	return strings.ToLower(sepRe().ReplaceAllString(name, "-"))
}

var sepRe = shims.LazyRegexp(`[-_.]+`)
