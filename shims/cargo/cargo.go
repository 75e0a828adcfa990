// Package cargo plans a cargo invocation for the shim: it reads the
// crates asked for from argv (cargo install, cargo add) or from the
// manifest (Cargo.toml, its workspace and members) for the commands that
// resolve or fetch dependencies, points cargo at the mirror by source
// replacement, and reads back what was resolved from Cargo.lock (or, for
// cargo install, $CARGO_HOME/.crates2.json).
//
// Commands: install and add are read from argv (add also from the
// manifest). The commands known not to fetch (version, help, search,
// login, logout, owner, yank, new, init, locate-project,
// verify-project, read-manifest, clean, report, uninstall, config, info)
// have no install intent. Every other command, known (build, check, run,
// test, bench, fetch, doc, generate-lockfile, update, vendor, package,
// publish, tree, metadata, remove, pkgid, fix, rustc, rustdoc) or not (an
// alias, an external cargo-foo), is planned as one that may resolve and
// fetch the manifest's dependencies.
//
// Requests: a git dependency's Source is its URL; a path dependency's
// Source is "path:" and the path as written. A request with no name is a
// package this planner could not read (an unreadable manifest, a bare
// `cargo install` in a package directory).
//
// Configuration (config.go): aliases are expanded as cargo does before
// planning (CARGO_ALIAS_<NAME>, [alias] of the --config values and the
// config files; a built-in command cannot be aliased away, except that
// an alias of a command without install intent is planned anyway, in
// case the real cargo predates the command). The [source], [registries]
// and [patch] tables of the same configuration, and
// CARGO_REGISTRIES_<NAME>_INDEX for each registry named, are requests
// (a source's or registry's URL as Registry, a git source's as Source,
// a directory source as "path:"). An argv --config setting net or http is
// a request whose Registry names it, which no policy approves.
//
// What the shim refuses (Plan returns an error; the shim refuses an
// invocation it cannot check, whatever the policy's on_unknown_source):
// a configuration source that cannot be read or parsed (so an alias
// cannot be expanded), an include, an alias of another type or mixing
// strings and arrays, a recursive alias; with a mirror, any configuration
// of the mirror's source and an argv --config of crates-io's (cargo takes
// the last --config, which would beat the shim's; config files rank
// below it); a manifest, lock, config file or .crates2.json that is not a
// regular file (a FIFO could answer the shim and cargo differently).
// A marker Registry would not do for these: an unknown registry is only
// refused when on_unknown_source is block.
//
// Read-back: for everything but install, what the build has on disk,
// after every run: each registry package of Cargo.lock whose .crate file
// is in $CARGO_HOME/registry/cache (whether this run or an earlier one
// downloaded it; a lock's crates for other platforms are never
// downloaded and are left out), and each git package that is new or
// changed in the lock. Hash is "sha256:" and the lock's
// checksum; git packages have none. For install, the new entries of
// .crates2.json, which holds no checksum: the hash is that of the
// downloaded .crate in the cache, when there is exactly one.
package cargo

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/resolver/ecosystem"
	"github.com/sandtrail/sandtrail/shims"
)

// MirrorSource is the name of the replacement source the shim configures.
const MirrorSource = "sandtrail-mirror"

// noInstall are the commands that neither resolve nor fetch crates.
var noInstall = map[string]bool{
	"version": true, "help": true, "search": true, "login": true, "logout": true, "owner": true,
	"yank": true, "new": true, "init": true, "locate-project": true, "verify-project": true,
	"read-manifest": true, "clean": true, "report": true, "uninstall": true, "config": true, "info": true,
}

// globalValue are the global options that take a value.
var globalValue = map[string]bool{"--manifest-path": true, "-C": true, "--config": true, "-Z": true,
	"--color": true, "--explain": true, "--lockfile-path": true}

// commandValue are the options of cargo's commands that take a value.
var commandValue = map[string]bool{
	"--version": true, "--vers": true, "--git": true, "--branch": true, "--tag": true, "--rev": true,
	"--path": true, "--registry": true, "--index": true, "--root": true, "--features": true, "-F": true,
	"--target": true, "--target-dir": true, "--profile": true, "-j": true, "--jobs": true, "--bin": true,
	"--example": true, "--test": true, "--bench": true, "--package": true, "-p": true, "--exclude": true,
	"--message-format": true, "--rename": true, "--base": true, "--precise": true, "--depth": true,
	"--format": true, "--prefix": true, "--edges": true, "-e": true, "--invert": true, "-i": true,
	"--charset": true, "--format-version": true, "--filter-platform": true, "--token": true,
	"--out-dir": true, "--artifact-dir": true, "--crate-type": true, "--print": true, "--pkgid": true,
	"--sync": true,
}

// invocation is a parsed cargo argv.
type invocation struct {
	toolchain string // "+nightly", or ""
	cmd       string
	// cmdAt is the command's index in argv, -1 without one.
	cmdAt        int
	manifestPath string
	chdir        string
	// positional are the command's positional arguments.
	positional []string
	// opts are the command's options with values, last one winning.
	opts map[string]string
	// configs are the --config values.
	configs []string
	// flags are the options without values.
	flags map[string]bool
}

// parseArgs reads cargo's argv. Options may come before or after the
// command and as --opt=value; parsing stops at "--".
func parseArgs(args []string) invocation {
	inv := invocation{opts: map[string]string{}, flags: map[string]bool{}, cmdAt: -1}
	off := 0
	if len(args) > 0 && strings.HasPrefix(args[0], "+") {
		inv.toolchain, args, off = args[0], args[1:], 1
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, val, hasVal := optValue(a)
		takes := globalValue[name] || (inv.cmd != "" && commandValue[name])
		if takes && !hasVal {
			if i+1 < len(args) {
				val = args[i+1]
				i++
			}
		}
		switch {
		case name == "--manifest-path":
			inv.manifestPath = val
		case name == "-C":
			inv.chdir = val
		case name == "--config":
			inv.configs = append(inv.configs, val)
		case takes:
			inv.opts[name] = val
		case strings.HasPrefix(a, "-") && a != "-":
			inv.flags[name] = true
		case inv.cmd == "":
			inv.cmd, inv.cmdAt = a, i+off
		default:
			inv.positional = append(inv.positional, a)
		}
	}
	return inv
}

// optValue splits --opt=value and -Xvalue (for short options that take a
// value) into the option's name and its value.
func optValue(a string) (name, val string, ok bool) {
	if strings.HasPrefix(a, "--") {
		if n, v, found := strings.Cut(a, "="); found {
			return n, v, true
		}
		return a, "", false
	}
	if len(a) > 2 && a[0] == '-' {
		if n := a[:2]; globalValue[n] || commandValue[n] {
			return n, strings.TrimPrefix(a[2:], "="), true
		}
	}
	return a, "", false
}

// Plan plans a cargo invocation (args exclude argv[0]); see the package
// doc for what it reads. A manifest it cannot read becomes a request of
// unknown packages, never a call without install intent; a configuration
// it cannot read (so an alias it cannot expand) is an error.
func Plan(args []string, c shims.Context) (*shims.Plan, error) {
	return plan(args, args, c, nil)
}

// plan plans args, which are orig with the aliases in expanded (the
// commands, in order) expanded.
func plan(orig, args []string, c shims.Context, expanded []string) (*shims.Plan, error) {
	inv := parseArgs(args)
	if inv.cmd == "" {
		return nil, nil
	}
	dir := c.Dir
	if inv.chdir != "" {
		dir = absIn(c.Dir, inv.chdir)
	}
	home := cargoHome(c)
	cfgs, err := loadConfigs(inv, dir, home)
	if err != nil {
		return nil, fmt.Errorf("planning cargo %s: %w", inv.cmd, err)
	}
	// An alias of a built-in command is ignored by cargo; that of one
	// without install intent is planned anyway (a cargo older than the
	// command runs it).
	if !builtin[inv.cmd] || noInstall[inv.cmd] && !slices.Contains(expanded, inv.cmd) {
		if next, err := expandAlias(inv, args, cfgs, c, expanded); err != nil || next != nil {
			if err != nil {
				return nil, err
			}
			return plan(orig, next, c, append(expanded, inv.cmd))
		}
	}
	if noInstall[inv.cmd] {
		return nil, nil
	}
	creqs, err := configRequests(cfgs, c.Mirror != "")
	if err != nil {
		return nil, fmt.Errorf("planning cargo %s: %w", inv.cmd, err)
	}
	p := &shims.Plan{Args: mirrorArgs(orig, inv.toolchain, c.Mirror), Requests: creqs}
	defer func() { p.Requests = append(p.Requests, registryEnv(p.Requests, inv, c)...) }()
	if inv.cmd == "install" {
		return planInstall(p, inv, dir, home, c)
	}
	manifest := ""
	if inv.manifestPath != "" {
		manifest = absIn(dir, inv.manifestPath)
	} else if m, ok := findManifest(dir); ok {
		manifest = m
	}
	if inv.cmd == "add" {
		p.Requests = append(p.Requests, addRequests(inv)...)
	}
	if manifest == "" {
		return p, nil
	}
	reqs, root, err := workspaceRequests(manifest)
	if err != nil {
		reqs = append(reqs, shims.Request{Origin: rel(dir, manifest)})
	}
	p.Requests = append(p.Requests, reqs...)
	lock := filepath.Join(root, "Cargo.lock")
	before, err := snapshot(lock, home)
	if err != nil {
		return nil, fmt.Errorf("reading Cargo.lock before cargo ran: %w", err)
	}
	all := p.Requests
	p.Collect = func(int) ([]shims.Package, error) {
		after, err := snapshot(lock, home)
		if err != nil {
			return nil, fmt.Errorf("reading Cargo.lock after cargo ran: %w", err)
		}
		return lockResult(before, after, all), nil
	}
	return p, nil
}

// indexPath is the path of the crates.io index on the mirror: beneath the
// registry's prefix for Cargo ("/crates/index/").
func indexPath() string {
	e, _ := ecosystem.Lookup(ecosystem.Cargo)
	return e.MirrorPrefix + "index/"
}

// mirrorArgs returns args with the source replacement for mirror inserted
// after the +toolchain, or nil when there is no mirror.
func mirrorArgs(args []string, toolchain, mirror string) []string {
	if mirror == "" {
		return nil
	}
	out := make([]string, 0, len(args)+4)
	rest := args
	if toolchain != "" {
		out, rest = append(out, toolchain), args[1:]
	}
	out = append(out,
		"--config", fmt.Sprintf("source.crates-io.replace-with=%q", MirrorSource),
		"--config", fmt.Sprintf("source.%s.registry=%q", MirrorSource, "sparse+"+strings.TrimSuffix(mirror, "/")+indexPath()))
	return append(out, rest...)
}

// expandAlias returns args with inv's command replaced by its alias,
// nil when it is no alias.
func expandAlias(inv invocation, args []string, cfgs []configDoc, c shims.Context, expanded []string) ([]string, error) {
	exp, ok, err := aliasOf(inv.cmd, cfgs, c)
	if err != nil || !ok {
		return nil, err
	}
	for _, e := range expanded {
		if e == inv.cmd {
			return nil, fmt.Errorf("expanding cargo alias %s: it is recursive", inv.cmd)
		}
	}
	if len(expanded) >= maxAliasDepth {
		return nil, fmt.Errorf("expanding cargo alias %s: more than %d aliases deep", inv.cmd, maxAliasDepth)
	}
	next := append(append(append([]string{}, args[:inv.cmdAt]...), exp...), args[inv.cmdAt+1:]...)
	return next, nil
}

// addRequests reads cargo add's crate specs.
func addRequests(inv invocation) []shims.Request {
	base := shims.Request{Registry: inv.opts["--registry"], Origin: "argv"}
	if g := inv.opts["--git"]; g != "" {
		base.Source = g
	} else if p := inv.opts["--path"]; p != "" {
		base.Source = "path:" + p
	}
	var out []shims.Request
	for _, s := range inv.positional {
		r := base
		r.Name, r.Spec, _ = strings.Cut(s, "@")
		r.Exact = exactOf(r.Spec)
		out = append(out, r)
	}
	if len(out) == 0 {
		out = append(out, base)
	}
	return out
}

// planInstall plans cargo install.
func planInstall(p *shims.Plan, inv invocation, dir, home string, c shims.Context) (*shims.Plan, error) {
	if inv.flags["--list"] {
		return nil, nil
	}
	base := shims.Request{Registry: firstOf(inv.opts["--registry"], inv.opts["--index"]), Origin: "argv"}
	if g := inv.opts["--git"]; g != "" {
		base.Source = g
	} else if path := inv.opts["--path"]; path != "" {
		base.Source = "path:" + path
	}
	version := firstOf(inv.opts["--version"], inv.opts["--vers"])
	for _, s := range inv.positional {
		r := base
		r.Name, r.Spec, _ = strings.Cut(s, "@")
		if r.Spec == "" {
			r.Spec = version
		}
		r.Exact = installExact(r.Spec)
		p.Requests = append(p.Requests, r)
	}
	if len(inv.positional) == 0 {
		p.Requests = append(p.Requests, base)
	}
	root := firstOf(absOrEmpty(dir, inv.opts["--root"]), absOrEmpty(dir, getenv(c, "CARGO_INSTALL_ROOT")), home)
	before, err := installs(root)
	if err != nil {
		return nil, fmt.Errorf("reading .crates2.json before cargo ran: %w", err)
	}
	reqs := p.Requests
	p.Collect = func(int) ([]shims.Package, error) {
		after, err := installs(root)
		if err != nil {
			return nil, fmt.Errorf("reading .crates2.json after cargo ran: %w", err)
		}
		return installDiff(before, after, home, reqs), nil
	}
	return p, nil
}

// installExact: cargo install reads a bare version as =version.
func installExact(spec string) string {
	s := strings.TrimSpace(spec)
	if fullVersion(s) {
		return s
	}
	return exactOf(s)
}

// parseCrates2 reads the install keys of a .crates2.json.
func parseCrates2(b []byte) (map[string]bool, error) {
	var v struct {
		Installs map[string]json.RawMessage `json:"installs"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("parsing .crates2.json: %w", err)
	}
	out := map[string]bool{}
	for k := range v.Installs {
		out[k] = true
	}
	return out, nil
}

func cargoHome(c shims.Context) string {
	if h := getenv(c, "CARGO_HOME"); h != "" {
		return absIn(c.Dir, h)
	}
	return filepath.Join(getenv(c, "HOME"), ".cargo")
}

func getenv(c shims.Context, k string) string {
	if c.Getenv == nil {
		return ""
	}
	return c.Getenv(k)
}

func absIn(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

func absOrEmpty(dir, p string) string {
	if p == "" {
		return ""
	}
	return absIn(dir, p)
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
