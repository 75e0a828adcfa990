package pip

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/sandtrail/sandtrail/shims"
)

// pip's configuration: the INI files and the PIP_<OPTION> variables give
// an option's default, which argv then overrides (a store option) or
// appends to (an append option), as pip 23's ConfigOptionParser does.

// configKeys are the options the planner reads from the configuration,
// by their long names; append options take a space-separated list.
var configKeys = []struct {
	name   string
	append bool
	flag   bool
}{
	{"index-url", false, false}, {"extra-index-url", true, false}, {"find-links", true, false},
	{"no-index", false, true}, {"editable", true, false}, {"requirement", true, false},
	{"constraint", true, false}, {"report", false, false},
}

// configured are the options that pip's configuration gives command cmd,
// in configKeys order, each value with where it was read. isolated is
// pip's --isolated (the literal argument), which skips the user's files
// and the environment.
func configured(cmd string, c shims.Context, isolated bool) ([]opt, []string, error) {
	getenv := c.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	type val struct{ v, origin string }
	merged := map[string]val{}
	for _, f := range configFiles(getenv, isolated) {
		b, err := readCapped(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading pip's configuration: %w", err)
		}
		entries, err := parseINI(b)
		if err != nil {
			return nil, nil, fmt.Errorf("reading pip's configuration %s: %w", f, err)
		}
		for _, e := range entries {
			merged[e.section+"."+configName(e.key)] = val{e.value, "pip.conf " + f}
		}
	}
	if !isolated {
		for _, k := range configKeys {
			names := []string{k.name}
			if k.name == "index-url" {
				names = append(names, "pypi-url")
			}
			v, env, err := envValue(getenv, names)
			if err != nil {
				return nil, nil, err
			}
			if v != "" {
				merged[":env:."+k.name] = val{v, "env " + env}
			}
		}
	}
	var out []opt
	var origins []string
	for _, k := range configKeys {
		var eff val
		for _, sec := range []string{"global", cmd, ":env:"} {
			if v := merged[sec+"."+k.name]; v.v != "" {
				eff = v
			}
		}
		switch {
		case eff.v == "":
		case k.flag:
			if b, ok := strtobool(eff.v); ok && b {
				out, origins = append(out, opt{name: k.name}), append(origins, eff.origin)
			}
		case k.append:
			for _, v := range strings.Fields(eff.v) {
				out, origins = append(out, opt{name: k.name, value: v}), append(origins, eff.origin)
			}
		default:
			out, origins = append(out, opt{name: k.name, value: eff.v}), append(origins, eff.origin)
		}
	}
	return out, origins, nil
}

// configFiles are pip's configuration files in the order pip loads them,
// the last winning: the site-wide ones ($XDG_CONFIG_DIRS/pip/pip.conf,
// /etc/pip.conf), the user's (~/.pip/pip.conf, then
// $XDG_CONFIG_HOME/pip/pip.conf; not when isolated or when
// PIP_CONFIG_FILE names a file that exists), the virtualenv's
// ($VIRTUAL_ENV/pip.conf) and PIP_CONFIG_FILE. PIP_CONFIG_FILE=/dev/null
// loads none.
func configFiles(getenv func(string) string, isolated bool) []string {
	env := getenv("PIP_CONFIG_FILE")
	if env == "/dev/null" {
		return nil
	}
	var files []string
	xdg := getenv("XDG_CONFIG_DIRS")
	if xdg == "" {
		xdg = "/etc/xdg"
	}
	for _, d := range filepath.SplitList(xdg) {
		files = append(files, filepath.Join(d, "pip", "pip.conf"))
	}
	files = append(files, "/etc/pip.conf")
	if home := getenv("HOME"); !isolated && !(env != "" && exists(env)) {
		if home != "" {
			files = append(files, filepath.Join(home, ".pip", "pip.conf"))
		}
		cfgHome := getenv("XDG_CONFIG_HOME")
		if cfgHome == "" && home != "" {
			cfgHome = filepath.Join(home, ".config")
		}
		if cfgHome != "" {
			files = append(files, filepath.Join(cfgHome, "pip", "pip.conf"))
		}
	}
	if venv := getenv("VIRTUAL_ENV"); venv != "" {
		files = append(files, filepath.Join(venv, "pip.conf"))
	}
	if env != "" {
		files = append(files, env)
	}
	return files
}

// envValue is the PIP_ variable of an option (PIP_ then the name upper-
// or lower-cased, with _ or -), and its name. Two spellings with
// different values are an error: which one pip takes depends on the
// environment's order, which a planner cannot see.
func envValue(getenv func(string) string, names []string) (string, string, error) {
	v, from := "", ""
	for _, n := range names {
		u := strings.ReplaceAll(n, "-", "_")
		for _, k := range []string{strings.ToUpper(u), u, n, strings.ToUpper(n)} {
			got := getenv("PIP_" + k)
			if got == "" {
				continue
			}
			if v != "" && got != v {
				return "", "", fmt.Errorf("reading pip's environment: PIP_%s and %s disagree", k, from)
			}
			v, from = got, "PIP_"+k
		}
	}
	return v, from, nil
}

// configName is pip's _normalize_name of a configuration key, with
// pypi-url read as index-url.
func configName(k string) string {
	k = strings.TrimPrefix(strings.ReplaceAll(strings.ToLower(k), "_", "-"), "--")
	if k == "pypi-url" {
		return "index-url"
	}
	return k
}

// strtobool is pip's strtobool; ok is false for a value it refuses.
func strtobool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "y", "yes", "t", "true", "on", "1":
		return true, true
	case "n", "no", "f", "false", "off", "0":
		return false, true
	}
	return false, false
}

// iniEntry is one key of an INI file, in a section.
type iniEntry struct{ section, key, value string }

// parseINI reads an INI file as Python's RawConfigParser does (strict):
// [section] headers, key = value or key: value, # and ; comment lines,
// indented continuation lines, a DEFAULT section whose keys every other
// section has, and an error for a duplicate section or key, a key before
// any section or a line it cannot read. Keys are lower-cased; entries
// come in file order, DEFAULT's first in each section.
func parseINI(b []byte) ([]iniEntry, error) {
	type section struct {
		name string
		keys []string
		vals map[string][]string
	}
	var secs []*section
	byName := map[string]*section{}
	var cur *section
	optName, indent := "", 0
	for n, line := range strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n") {
		v := strings.TrimSpace(line)
		if v == "" || v[0] == '#' || v[0] == ';' {
			if v == "" && cur != nil && optName != "" {
				cur.vals[optName] = append(cur.vals[optName], "")
			}
			continue
		}
		lead := len(line) - len(strings.TrimLeft(line, " \t\f\v\r"))
		if cur != nil && optName != "" && lead > indent {
			cur.vals[optName] = append(cur.vals[optName], v)
			continue
		}
		indent = lead
		if end := strings.LastIndexByte(v, ']'); v[0] == '[' && end >= 2 {
			name := v[1:end]
			if byName[name] != nil {
				return nil, fmt.Errorf("line %d: section %q given twice", n+1, name)
			}
			cur = &section{name: name, vals: map[string][]string{}}
			byName[name] = cur
			secs = append(secs, cur)
			optName = ""
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("line %d: a key before any section", n+1)
		}
		at := strings.IndexAny(v, "=:")
		if at < 0 || strings.TrimSpace(v[:at]) == "" {
			return nil, fmt.Errorf("line %d: not a key = value", n+1)
		}
		optName = strings.ToLower(strings.TrimSpace(v[:at]))
		if _, dup := cur.vals[optName]; dup {
			return nil, fmt.Errorf("line %d: key %q given twice in [%s]", n+1, optName, cur.name)
		}
		cur.keys = append(cur.keys, optName)
		cur.vals[optName] = []string{strings.TrimSpace(v[at+1:])}
	}
	var out []iniEntry
	def := byName["DEFAULT"]
	for _, s := range secs {
		if s == def {
			continue
		}
		var keys []string
		if def != nil {
			keys = append(keys, def.keys...)
		}
		keys = append(keys, s.keys...)
		for _, k := range keys {
			vals, ok := s.vals[k]
			if !ok {
				vals = def.vals[k]
			}
			out = append(out, iniEntry{s.name, k, strings.TrimRight(strings.Join(vals, "\n"), " \t\n\r\f\v")})
		}
	}
	return out, nil
}
