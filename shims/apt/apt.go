// Package apt plans apt and apt-get invocations for the shim, and holds
// the small, unprivileged halves of the privileged install: the client of
// the root daemon's apt broker (Broker), which runs apt-get as root on the
// agent's behalf, and the hook that apt runs before dpkg
// (DPkg::Pre-Install-Pkgs, protocol version 3) to hash each .deb it is
// about to install (RunHook). The broker's server half is
// shims/apt/broker, which the shim binary does not import.
//
// Plan reads install intent and the packages asked for from argv. The
// commands that install or fetch packages are install, reinstall,
// upgrade, full-upgrade, dist-upgrade, dselect-upgrade, build-dep,
// satisfy, download and source, and remove, purge and autoremove when a
// package carries apt's "install this" suffix (pkg+). An unknown command
// is planned as an install of unknown packages. update, list, search,
// show, policy, the apt-cache and apt-config queries, clean and --version
// have no install intent. A local .deb (a path) is a request whose Source
// is the path. A name with a regular expression's or glob's characters
// (*?[]^$|(), which Debian's names never hold; satisfy's dependency
// expressions aside) adds a request whose Source is "apt-pattern:NAME",
// which the policy checks as an unknown source: apt-get would match it
// against every package name.
//
// Plan does not read back: the broker does, from the hook and from
// --print-uris (checking what apt would install, dependencies included,
// against the policy), and writes the pkg.install events. Where root runs
// apt itself (no broker), the shim's check sees argv's names only: not
// the dependencies, not a name that apt reads as a pattern only because
// no package has it ("netcat-traditiona."), not what -o, -c, APT_CONFIG
// or apt.conf.d configure (a later -o Acquire::http::Proxy replaces the
// mirror's), and no pkg.install event is written for that run.
package apt

import (
	"strings"

	"github.com/sandtrail/sandtrail/shims"
)

// installCmds are the commands that install or fetch packages.
var installCmds = map[string]bool{"install": true, "reinstall": true, "upgrade": true, "full-upgrade": true,
	"dist-upgrade": true, "dselect-upgrade": true, "build-dep": true, "satisfy": true, "download": true, "source": true}

// removeCmds install the packages written pkg+.
var removeCmds = map[string]bool{"remove": true, "purge": true, "autoremove": true, "autopurge": true}

// queryCmds neither install nor fetch packages.
var queryCmds = map[string]bool{"update": true, "list": true, "search": true, "show": true, "showsrc": true,
	"policy": true, "depends": true, "rdepends": true, "madison": true, "showpkg": true, "pkgnames": true,
	"clean": true, "autoclean": true, "check": true, "changelog": true, "moo": true, "help": true,
	"edit-sources": true, "stats": true, "dump": true, "dumpavail": true, "unmet": true, "indextargets": true}

// valueOpts are the options that take a value as the next argument.
var valueOpts = map[string]bool{"-o": true, "--option": true, "-c": true, "--config-file": true, "-t": true,
	"--target-release": true, "--default-release": true, "-a": true, "--host-architecture": true,
	"-P": true, "--build-profiles": true, "--solver": true, "--planner": true, "--format": true}

// Args is a parsed apt argv.
type Args struct {
	Command string
	// Positional are the packages (or paths) after the command.
	Positional []string
	// Opts are the options, as "-o", "K=V" pairs flattened ("-o=K=V" and
	// "-oK=V" are split into the option and its value).
	Opts []Opt
}

// Opt is one option and its value ("" for flags).
type Opt struct {
	Name, Value string
}

// ParseArgs reads apt's argv: options before or after the command, as
// -o V, -oV, -o=V, --option V or --option=V; "--" ends the options.
func ParseArgs(args []string) Args {
	var a Args
	opts := true
	for i := 0; i < len(args); i++ {
		s := args[i]
		if opts && s == "--" {
			opts = false
			continue
		}
		if opts && strings.HasPrefix(s, "-") && len(s) > 1 {
			o := splitOpt(s)
			if valueOpts[o.Name] && o.Value == "" && !strings.Contains(s, "=") && i+1 < len(args) {
				i++
				o.Value = args[i]
			}
			a.Opts = append(a.Opts, o)
			continue
		}
		if a.Command == "" {
			a.Command = s
		} else {
			a.Positional = append(a.Positional, s)
		}
	}
	return a
}

// splitOpt splits --name=value, -xvalue and -x=value.
func splitOpt(s string) Opt {
	if strings.HasPrefix(s, "--") {
		n, v, _ := strings.Cut(s, "=")
		return Opt{n, v}
	}
	if len(s) > 2 && valueOpts[s[:2]] {
		return Opt{s[:2], strings.TrimPrefix(s[2:], "=")}
	}
	if n, v, ok := strings.Cut(s, "="); ok {
		return Opt{n, v}
	}
	return Opt{Name: s}
}

// Has reports whether the option name (any of names) was given.
func (a Args) Has(names ...string) bool {
	for _, o := range a.Opts {
		for _, n := range names {
			if o.Name == n {
				return true
			}
		}
	}
	return false
}

// value returns the last value of the option names.
func (a Args) value(names ...string) string {
	v := ""
	for _, o := range a.Opts {
		for _, n := range names {
			if o.Name == n {
				v = o.Value
			}
		}
	}
	return v
}

// Plan plans an apt or apt-get invocation (args exclude argv[0]). With a
// mirror, apt's HTTP proxy is the mirror.
func Plan(args []string, c shims.Context) (*shims.Plan, error) {
	a := ParseArgs(args)
	if a.Command == "" || queryCmds[a.Command] {
		return nil, nil
	}
	if removeCmds[a.Command] && !anySuffix(a.Positional, "+") {
		return nil, nil
	}
	p := &shims.Plan{Requests: Requests(a)}
	for _, s := range a.Positional {
		if a.Command != "satisfy" && strings.ContainsAny(s, "*?[]^$|()") {
			// A pattern is a source the policy cannot approve: it is
			// checked as one, and refused unless the policy only flags
			// unknown sources.
			p.Requests = append(p.Requests, shims.Request{Source: "apt-pattern:" + s, Origin: "argv pattern " + s})
		}
	}
	if c.Mirror != "" {
		p.Args = append([]string{"-o", "Acquire::http::Proxy=" + strings.TrimSuffix(c.Mirror, "/") + "/"}, args...)
	}
	return p, nil
}

// Requests returns the packages a parsed invocation asks for. An
// invocation that names none (upgrade, an unknown command) asks for
// unknown packages: one request without a name.
func Requests(a Args) []shims.Request {
	release := a.value("-t", "--target-release", "--default-release")
	var out []shims.Request
	for _, s := range a.Positional {
		if a.Command == "satisfy" {
			out = append(out, satisfyRequests(s, release)...)
			continue
		}
		if removeCmds[a.Command] {
			if !strings.HasSuffix(s, "+") {
				continue
			}
			s = strings.TrimSuffix(s, "+")
		}
		out = append(out, request(s, release))
	}
	if len(out) == 0 {
		out = append(out, shims.Request{Registry: release, Origin: "argv"})
	}
	return out
}

// request reads pkg, pkg=version, pkg/release, pkg:arch or a path.
func request(s, release string) shims.Request {
	r := shims.Request{Registry: release, Origin: "argv"}
	if IsPath(s) {
		r.Source = s
		return r
	}
	name, ver, pinned := strings.Cut(s, "=")
	if pinned {
		r.Spec, r.Exact = "="+ver, ver
	} else if n, rel, ok := strings.Cut(name, "/"); ok {
		name, r.Registry = n, rel
	}
	name, _, _ = strings.Cut(name, ":")
	r.Name = name
	return r
}

// satisfyRequests reads a dependency string: "a (>= 1), b | c".
func satisfyRequests(s, release string) []shims.Request {
	var out []shims.Request
	for _, alt := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '|' }) {
		name, spec, _ := strings.Cut(strings.TrimSpace(alt), " ")
		spec = strings.Trim(strings.TrimSpace(spec), "()")
		name, _, _ = strings.Cut(name, ":")
		if name != "" {
			out = append(out, shims.Request{Name: name, Spec: spec, Registry: release, Origin: "argv"})
		}
	}
	return out
}

// IsPath reports whether apt reads s as a file (a .deb, a .dsc, a
// directory with debian/control) rather than a package name.
func IsPath(s string) bool {
	return strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") ||
		s == "." || s == ".." || strings.HasPrefix(s, "~") || strings.HasSuffix(s, ".deb") || strings.HasSuffix(s, ".dsc")
}

func anySuffix(list []string, suffix string) bool {
	for _, s := range list {
		if strings.HasSuffix(s, suffix) {
			return true
		}
	}
	return false
}
