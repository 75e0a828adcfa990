package cargo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandtrail/sandtrail/shims"
)

// cargo's configuration, as far as the planner needs it: aliases (which
// hide the command that really runs), source replacements, registries
// and patches (which say where crates come from). The sources are, from
// the highest precedence: the --config values on argv (a later one over
// an earlier one), the environment, then the config files of the working
// directory and each parent up to /, deeper first (in each directory
// .cargo/config over .cargo/config.toml), then $CARGO_HOME's.

// maxAliasDepth bounds the aliases expanded for one invocation.
const maxAliasDepth = 16

// builtin are cargo's own commands, which an alias cannot replace; b, c,
// d, t, r and rm are built-in aliases, which a user alias can.
var builtin = map[string]bool{
	"add": true, "bench": true, "build": true, "check": true, "clean": true, "config": true, "doc": true,
	"fetch": true, "fix": true, "generate-lockfile": true, "help": true, "info": true, "init": true,
	"install": true, "locate-project": true, "login": true, "logout": true, "metadata": true, "new": true,
	"owner": true, "package": true, "pkgid": true, "publish": true, "read-manifest": true, "remove": true,
	"report": true, "run": true, "rustc": true, "rustdoc": true, "search": true, "test": true, "tree": true,
	"uninstall": true, "update": true, "vendor": true, "verify-project": true, "version": true, "yank": true,
}

// configDoc is one parsed configuration source.
type configDoc struct {
	origin string
	argv   bool // a --config on the command line
	doc    map[string]any
}

// loadConfigs reads the configuration sources of inv run in dir, highest
// precedence first. A source that cannot be read or parsed is an error:
// what it configures cannot be checked.
func loadConfigs(inv invocation, dir, home string) ([]configDoc, error) {
	var out []configDoc
	for i := len(inv.configs) - 1; i >= 0; i-- {
		d, err := argvConfig(inv.configs[i], dir)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	var paths []string
	for d := dir; ; d = filepath.Dir(d) {
		paths = append(paths, filepath.Join(d, ".cargo", "config"), filepath.Join(d, ".cargo", "config.toml"))
		if filepath.Dir(d) == d {
			break
		}
	}
	if filepath.IsAbs(home) {
		paths = append(paths, filepath.Join(home, "config"), filepath.Join(home, "config.toml"))
	}
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			continue
		}
		doc, err := readTOML(p)
		if err != nil {
			return nil, fmt.Errorf("reading cargo config %s: %w", p, err)
		}
		out = append(out, configDoc{origin: p, doc: doc})
	}
	for _, d := range out {
		if _, ok := d.doc["include"]; ok {
			return nil, fmt.Errorf("reading cargo config %s: include is not supported by the shim", d.origin)
		}
	}
	return out, nil
}

// argvConfig reads one --config value: a file when the path exists
// (relative to the working directory), else a TOML key = value.
func argvConfig(v, dir string) (configDoc, error) {
	if p := absIn(dir, v); v != "" {
		if _, err := os.Lstat(p); err == nil {
			doc, err := readTOML(p)
			if err != nil {
				return configDoc{}, fmt.Errorf("reading --config %s: %w", v, err)
			}
			return configDoc{origin: "argv --config " + v, argv: true, doc: doc}, nil
		}
	}
	doc, err := parseTOML(v)
	if err != nil {
		return configDoc{}, fmt.Errorf("parsing --config %q: %w", v, err)
	}
	return configDoc{origin: "argv --config", argv: true, doc: doc}, nil
}

// aliasOf returns the expansion of the alias name, as cargo merges it:
// a string (the highest-precedence one) split on whitespace, or arrays
// joined, lower precedence first. A definition of another type, or
// strings mixed with arrays, is an error (cargo refuses those too).
func aliasOf(name string, cfgs []configDoc, c shims.Context) ([]string, bool, error) {
	type def struct {
		origin string
		v      any
	}
	var defs []def
	env := "CARGO_ALIAS_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	envDone := false
	for _, d := range cfgs {
		if !d.argv && !envDone {
			envDone = true
			if v := getenv(c, env); v != "" {
				defs = append(defs, def{"env " + env, v})
			}
		}
		if a, ok := d.doc["alias"].(map[string]any); ok {
			if v, ok := a[name]; ok {
				defs = append(defs, def{d.origin, v})
			}
		}
	}
	if v := getenv(c, env); !envDone && v != "" {
		defs = append(defs, def{"env " + env, v})
	}
	if len(defs) == 0 {
		return nil, false, nil
	}
	if s, ok := defs[0].v.(string); ok {
		for _, d := range defs[1:] {
			if _, ok := d.v.(string); !ok {
				return nil, false, fmt.Errorf("reading cargo alias %s: %s mixes a string with an array", name, d.origin)
			}
		}
		return strings.Fields(s), true, nil
	}
	var out []string
	for i := len(defs) - 1; i >= 0; i-- {
		arr, ok := defs[i].v.([]any)
		if !ok {
			return nil, false, fmt.Errorf("reading cargo alias %s: %s is neither a string nor an array", name, defs[i].origin)
		}
		for _, e := range arr {
			s, ok := e.(string)
			if !ok {
				return nil, false, fmt.Errorf("reading cargo alias %s: %s holds a non-string", name, defs[i].origin)
			}
			out = append(out, s)
		}
	}
	return out, true, nil
}

// configRequests returns the requests cargo's configuration makes: every
// source it defines ([source.<name>] registry, git, directory or
// local-registry), every registry ([registries.<name>] index), every
// [patch.<source>] dependency, and each network setting of an argv
// --config (net, http), which the policy sees as an unknown registry.
// With a mirror, a configuration of the mirror's source, or an argv one
// of crates-io's (which would override the shim's, given later), is an
// error: the shim refuses it; but a config file's table of the mirror's
// source that sets only its registry (install.sh's) is neither an error
// nor a request, since the shim's value replaces it (onlyRegistry).
func configRequests(cfgs []configDoc, mirror bool) ([]shims.Request, error) {
	var out []shims.Request
	for _, d := range cfgs {
		src, _ := d.doc["source"].(map[string]any)
		for _, name := range sortedKeys(src) {
			if mirror && (name == MirrorSource || d.argv && name == "crates-io") {
				if !d.argv && name == MirrorSource && onlyRegistry(src[name]) {
					continue // install.sh's: the shim's --config replaces its one value
				}
				return nil, fmt.Errorf("checking %s: it configures source.%s, which the shim sets", d.origin, name)
			}
			out = append(out, sourceRequests(src[name], d.origin+" [source."+name+"]")...)
		}
		regs, _ := d.doc["registries"].(map[string]any)
		for _, name := range sortedKeys(regs) {
			if t, ok := regs[name].(map[string]any); ok {
				if idx, ok := t["index"].(string); ok {
					out = append(out, shims.Request{Registry: idx, Origin: d.origin + " [registries." + name + "]"})
				}
			}
		}
		if r, ok := d.doc["registry"].(map[string]any); ok {
			if idx, ok := r["index"].(string); ok {
				out = append(out, shims.Request{Registry: idx, Origin: d.origin + " [registry]"})
			}
		}
		if patch, ok := d.doc["patch"].(map[string]any); ok {
			for _, s := range sortedKeys(patch) {
				out = append(out, depsTable(patch[s], d.origin+" [patch."+s+"]", nil)...)
			}
		}
		for _, k := range []string{"net", "http"} {
			if _, ok := d.doc[k]; ok && d.argv {
				out = append(out, shims.Request{Registry: d.origin + " " + k, Origin: d.origin})
			}
		}
	}
	return out, nil
}

// onlyRegistry reports whether a [source.<name>] table sets registry, to
// a string, and nothing else: what install.sh writes for the mirror's
// source in $CARGO_HOME/config.toml. cargo takes a key of an argv
// --config over a config file's, so with the shim's own registry value on
// argv such a table configures nothing; any other key (replace-with above
// all, which would lead the mirror's source elsewhere) would stay.
func onlyRegistry(v any) bool {
	t, ok := v.(map[string]any)
	if !ok || len(t) != 1 {
		return false
	}
	_, ok = t["registry"].(string)
	return ok
}

// sourceRequests reads one [source.<name>] table.
func sourceRequests(v any, origin string) []shims.Request {
	t, ok := v.(map[string]any)
	if !ok {
		return []shims.Request{{Registry: "cargo-source:unreadable", Origin: origin}}
	}
	var out []shims.Request
	if s, ok := t["registry"].(string); ok {
		out = append(out, shims.Request{Registry: s, Origin: origin})
	}
	if s, ok := t["git"].(string); ok {
		out = append(out, shims.Request{Source: s, Origin: origin})
	}
	for _, k := range []string{"directory", "local-registry"} {
		if s, ok := t[k].(string); ok {
			out = append(out, shims.Request{Source: "path:" + s, Origin: origin})
		}
	}
	return out
}

// registryEnv returns a request for each registry named in reqs (or by
// --registry) whose index CARGO_REGISTRIES_<NAME>_INDEX sets.
func registryEnv(reqs []shims.Request, inv invocation, c shims.Context) []shims.Request {
	names := []string{inv.opts["--registry"], getenv(c, "CARGO_REGISTRY_DEFAULT")}
	for _, r := range reqs {
		names = append(names, r.Registry)
	}
	var out []shims.Request
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || seen[n] || strings.ContainsAny(n, ":/") {
			continue
		}
		seen[n] = true
		k := "CARGO_REGISTRIES_" + strings.ToUpper(strings.ReplaceAll(n, "-", "_")) + "_INDEX"
		if v := getenv(c, k); v != "" {
			out = append(out, shims.Request{Registry: v, Origin: "env " + k})
		}
	}
	return out
}
