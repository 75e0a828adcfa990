// Package npm plans npm and npx invocations for the shim: it reads npm's
// argv as npm 11 does (nopt's option table, shorthands and abbreviations,
// npm's command aliases and abbreviations, npm-package-arg's spec
// classification), names the packages asked for, and after the real npm
// ran reads back what the tree holds: every package of the hidden
// lockfile (node_modules/.package-lock.json), which npm writes after
// every install, npm ci included, changed or not, with package-lock.json's
// root for what the project asks for. The global folder, which has no
// lockfile and holds what other installs put there, is diffed: its
// packages before and after.
//
// Trust model: argv, package.json, .npmrc and the lockfiles are the
// agent's. The parser errs toward install intent: every command that can
// reify a tree (install, ci, update, dedupe, prune, uninstall, link, exec,
// init <initializer>, audit fix, their aliases and abbreviations) is
// planned, and so are rebuild (it runs install scripts) and the commands
// that fetch a spec (pack <spec>, which clones a git spec and runs its
// prepare script, cache add, diff --diff=<spec>). An unreadable
// package.json is an error, and so is a package.json, lockfile or npmrc
// that is not a regular file (a FIFO could answer the planner and npm
// differently). An unknown option never drops a spec. What the read-back
// reports is the agent's account, which the daemon checks against what
// the mirror served.
//
// Registries: a request's Registry is the package's @scope:registry,
// else registry, as npm picks them, each from the first place that sets
// it: argv (--registry and its abbreviations, --@scope:registry=URL),
// the environment (npm_config_registry), then the npmrc files npm loads,
// the project's, the user's (userconfig), the global one (globalconfig,
// else <prefix>/etc/npmrc) and the builtin
// <prefix>/lib/node_modules/npm/npmrc, with userconfig, globalconfig and
// prefix themselves read from argv, the environment and the files before
// them, as npm does; a configured registry that is the session's mirror
// is not reported, and hides the places after it. The npm_config_
// variables of the keys it needs (registry, prefix, global, location,
// userconfig, globalconfig, cache) are read as npm reads them: the prefix
// in any letter case, _ for -, the last one in the environment winning;
// and PREFIX, DESTDIR. The builtin
// npmrc is looked for under the default prefix (node's), which is where
// a packaged npm lives.
package npm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/shims"
)

var _ shims.Planner = Plan
var _ shims.Planner = PlanNpx

// Plan plans one npm invocation (args exclude argv[0]). It returns nil
// for a command that installs nothing (npm --version, ls, run, config),
// and an error when a manifest or npmrc it must read cannot be read.
func Plan(args []string, c shims.Context) (*shims.Plan, error) {
	cfg := parseArgv(args)
	if len(cfg.remain) == 0 {
		return nil, nil
	}
	s := newSession(cfg, c)
	p, err := s.planCommand(deref(cfg.remain[0]), cfg.remain[1:])
	if p == nil || err != nil {
		return p, err
	}
	if s.npmrc(); s.rcErr != nil {
		return nil, fmt.Errorf("reading npm's config: %w", s.rcErr)
	}
	return p, nil
}

// planCommand plans the commands that fetch, install or build packages.
func (s *session) planCommand(cmd string, rest []string) (*shims.Plan, error) {
	switch cmd {
	case "install", "install-test", "ci", "install-ci-test", "update":
		return s.planInstall(cmd, rest)
	case "uninstall", "prune", "dedupe":
		return s.planReify(rest)
	case "audit":
		// audit fix (with or without --force) reifies the tree that
		// package.json and the lockfile describe.
		if len(rest) > 0 && rest[0] == "fix" {
			return s.planReify(nil)
		}
	case "rebuild":
		// rebuild runs the install scripts of the installed packages.
		return s.planReify(nil)
	case "link":
		return s.planLink(rest)
	case "exec":
		return s.planExec(rest)
	case "init":
		return s.planInit(rest)
	case "pack":
		// pack <spec> fetches it (a git spec is cloned and its prepare
		// script run); pack alone packs the current folder.
		return s.planFetch(positional(rest))
	case "cache":
		if len(rest) > 0 && rest[0] == "add" {
			return s.planFetch(positional(rest[1:]))
		}
	case "diff":
		// diff --diff=<spec> fetches the specs it compares.
		return s.planFetch(s.diffSpecs())
	}
	return nil, nil
}

// PlanNpx plans one npx invocation: npx rewrites its argv into `npm exec`
// and puts -- before the first positional argument, as npx-cli.js does.
func PlanNpx(args []string, c shims.Context) (*shims.Plan, error) {
	return Plan(append([]string{"exec"}, npxArgv(args)...), c)
}

// npxArgv is npx-cli.js's rewriting of npx's arguments.
func npxArgv(in []string) []string {
	args := slices.Clone(in)
	takesValue := map[string]bool{"package": true, "p": true, "cache": true, "userconfig": true, "call": true,
		"c": true, "shell": true, "npm": true, "node-arg": true, "n": true}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			break
		}
		if !strings.HasPrefix(arg, "-") {
			return slices.Insert(args, i, "--")
		}
		key, v, hasV := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		switch key {
		case "p":
			args[i] = "--package"
			if hasV {
				args[i] += "=" + v
			}
		case "shell":
			args[i] = "--script-shell"
			if hasV {
				args[i] += "=" + v
			}
		case "no-install":
			args[i] = "--yes=false"
		default:
			if sh, ok := shorthands[key]; ok && key != "n" {
				a := slices.Clone(sh)
				if hasV {
					a = append(a, v)
				}
				args = slices.Insert(slices.Delete(args, i, i+1), i, a...)
				i--
				continue
			}
		}
		k, known := options()[key]
		switch1 := known && (k == kindBool || k == kindBoolStr || k == kindBoolEnum)
		switch1 = switch1 || slices.Contains([]string{"no-install", "quiet", "q", "version", "v", "help", "h"}, key)
		if !hasV && !switch1 && (takesValue[key] || i+1 >= len(args) || !strings.HasPrefix(args[i+1], "-")) {
			i++
		}
	}
	return args
}

// session is what one invocation's config says.
type session struct {
	cfg    *config
	c      shims.Context
	global bool
	// dir is the local prefix; roots are the trees whose lockfiles the
	// read-back diffs.
	dir string
	// rc is the registry keys of the npmrc files, rcErr why they could
	// not be read.
	rc    map[string]string
	rcErr error
}

func newSession(cfg *config, c shims.Context) *session {
	s := &session{cfg: cfg, c: c}
	s.global = cfg.last("global") == "true" || cfg.last("location") == "global"
	if len(cfg.vals["global"]) == 0 && len(cfg.vals["location"]) == 0 {
		s.global = s.getenv("npm_config_global") == "true" || s.getenv("npm_config_location") == "global"
	}
	s.dir = s.localPrefix()
	return s
}

func (s *session) getenv(k string) string {
	if key, ok := cutConfigPrefix(k); ok && s.c.Environ != nil {
		return configEnv(s.c.Environ(), key)
	}
	if s.c.Getenv == nil {
		return ""
	}
	if v := s.c.Getenv(k); v != "" {
		return v
	}
	return s.c.Getenv(strings.ToUpper(k))
}

// cutConfigPrefix cuts npm_config_, in any case, off an environment
// variable's name.
func cutConfigPrefix(name string) (string, bool) {
	const prefix = "npm_config_"
	if len(name) < len(prefix) || !strings.EqualFold(name[:len(prefix)], prefix) {
		return "", false
	}
	return name[len(prefix):], true
}

// configKey is the config key that npm reads an npm_config_ variable's
// rest as (@npmcli/config's loadEnv): every _ but a first one is -, and
// the key is lower case, unless it is a //host: key.
func configKey(k string) string {
	if strings.HasPrefix(k, "//") || k == "" {
		return k
	}
	return strings.ToLower(k[:1] + strings.ReplaceAll(k[1:], "_", "-"))
}

// configEnv is the value npm takes for config key from the environment:
// every variable whose name is npm_config_ in any letter case
// (npm_config_registry, NPM_CONFIG_REGISTRY, Npm_Config_Registry) followed
// by the key names it, and the last non-empty one wins, as it does in
// npm's own loop over the environment.
func configEnv(environ []string, key string) string {
	want, v := configKey(key), ""
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || val == "" {
			continue
		}
		if k, ok := cutConfigPrefix(name); ok && configKey(k) == want {
			v = val
		}
	}
	return v
}

// abs makes p absolute against the working directory.
func (s *session) abs(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if strings.HasPrefix(p, "~/") {
		if h := s.getenv("HOME"); h != "" {
			return filepath.Join(h, p[2:])
		}
	}
	return filepath.Join(s.c.Dir, p)
}

// localPrefix is npm's local prefix: --prefix, else the nearest folder
// up from the working directory with a package.json or node_modules.
func (s *session) localPrefix() string {
	if p := s.cfg.last("prefix"); p != "" && p != "true" {
		return s.abs(p)
	}
	for d := s.c.Dir; d != ""; {
		if exists(filepath.Join(d, "package.json")) || exists(filepath.Join(d, "node_modules")) {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			break
		}
		d = up
	}
	return s.c.Dir
}

// globalPrefix is npm's global prefix: prefix from argv or the
// environment, else the default one.
func (s *session) globalPrefix() string {
	if p := s.cfg.last("prefix"); p != "" && p != "true" {
		return s.abs(p)
	}
	if p := s.getenv("npm_config_prefix"); p != "" {
		return s.abs(p)
	}
	return s.defaultPrefix()
}

// defaultPrefix is npm's default global prefix: $PREFIX, else the folder
// above node's bin folder (under $DESTDIR when set).
func (s *session) defaultPrefix() string {
	if s.c.Getenv == nil {
		return "/usr/local"
	}
	if p := s.c.Getenv("PREFIX"); p != "" {
		return s.abs(p)
	}
	for _, d := range filepath.SplitList(s.c.Getenv("PATH")) {
		if n, err := filepath.EvalSymlinks(filepath.Join(d, "node")); err == nil && filepath.IsAbs(n) {
			p := filepath.Dir(filepath.Dir(n))
			if dd := s.c.Getenv("DESTDIR"); dd != "" {
				p = filepath.Join(dd, p)
			}
			return p
		}
	}
	return "/usr/local"
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func treeLocks(dir string) []string {
	return []string{filepath.Join(dir, "npm-shrinkwrap.json"), filepath.Join(dir, "package-lock.json"),
		filepath.Join(dir, "node_modules", ".package-lock.json")}
}

// workspaceRoot is a folder above dir whose package.json declares
// workspaces, "" for none.
// A package.json that is not a regular file is an error.
func workspaceRoot(dir string) (string, error) {
	for d := filepath.Dir(dir); d != dir; dir, d = d, filepath.Dir(d) {
		b, err := readCapped(filepath.Join(d, "package.json"))
		if errors.Is(err, ErrNotRegular) {
			return "", err
		}
		if err == nil && strings.Contains(string(b), `"workspaces"`) {
			return d, nil
		}
	}
	return "", nil
}
