// Package broker is the root half of the privileged apt install, the
// PackageKit model: an unprivileged agent's apt shim connects to its unix
// socket and asks for an apt-get command; the broker checks it, asks the
// policy about the packages, runs apt-get as root with the mirror as its
// HTTP proxy and a Pre-Install-Pkgs hook that hashes every .deb, streams
// apt's output to the agent's own stdout and stderr (passed as fds), and
// records one pkg.install event per package the hook saw, or pkg.blocked
// when the policy refuses.
//
// Trust model: the client is hostile. What it sends is an argv, checked
// against an allowlist before anything runs: only install, reinstall and
// update; only options that cannot make root run a command or read a file
// the agent chose (never -o, -c, --allow-unauthenticated or the like);
// only package names of Debian's grammar (never a path: installing a
// local .deb as root is code execution as root). apt-get's environment is
// built, not inherited, its stdin is /dev/null (a dpkg conffile prompt or
// a pager would otherwise give the agent a root shell), and dpkg keeps
// existing conffiles without asking. The peer's pid, uid and session come
// from the kernel (SO_PEERCRED), never from the request. If the client's
// connection closes, apt-get is stopped.
//
// What the policy is asked about is what apt-get would install: argv's
// names first, then every package `apt-get --print-uris` lists (with an
// empty archive cache of the broker's, so that a cached package is listed
// too), dependencies included, by the name and version of its file. A
// name that matches no package is a pattern to apt-get ("fx-evi."
// installs fx-evil), so a name is not refused for looking like one
// (Validate refuses *?[]^$|() anyway, and '.' is in Debian's grammar):
// the package it resolves to is checked. What the check cannot see: a
// change of the archive between --print-uris and the install (an
// update by another client in between).
//
// The shim binary must not import this package (it imports the daemon's
// dependencies); the client half is apt.Broker.
package broker

import (
	"fmt"
	"regexp"
	"strings"
)

// Commands the broker runs.
var commands = map[string]bool{"install": true, "reinstall": true, "update": true}

// flags are the options allowed without a value.
var flags = map[string]bool{
	"-y": true, "--yes": true, "--assume-yes": true, "-q": true, "-qq": true, "--quiet": true,
	"--no-install-recommends": true, "--install-recommends": true, "--no-install-suggests": true,
	"--reinstall": true, "-s": true, "--simulate": true, "--dry-run": true, "--just-print": true,
	"--no-act": true, "--recon": true, "-f": true, "--fix-broken": true, "--no-upgrade": true,
	"--only-upgrade": true, "-V": true, "--verbose-versions": true, "-d": true, "--download-only": true,
	"--print-uris": true, "-u": true, "--show-upgraded": true, "--no-remove": true, "-m": true,
	"--ignore-missing": true, "--fix-missing": true,
}

// shortFlags may be combined ("-yq").
const shortFlags = "yqsfVdum"

// releaseOpts take a release name.
var releaseOpts = map[string]bool{"-t": true, "--target-release": true, "--default-release": true}

var (
	pkgRe     = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+(:[a-z0-9-]+)?(=[A-Za-z0-9.+~:-]+|/[A-Za-z0-9.+_-]+)?$`)
	releaseRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_-]*$`)
)

// Refusal is why the broker refuses a request.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

// Validate checks a client's apt-get argv against the allowlist and
// returns the argv the broker will run (options and packages as given)
// and its command, or a *Refusal.
func Validate(args []string) (cmd string, out []string, err error) {
	var pkgs []string
	opts := true
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case opts && a == "--":
			opts = false
		case opts && strings.HasPrefix(a, "-"):
			n, v, hasV := strings.Cut(a, "=")
			if releaseOpts[n] || (strings.HasPrefix(a, "-t") && !strings.HasPrefix(a, "--") && len(a) > 2) {
				if !hasV && len(a) > 2 && !strings.HasPrefix(a, "--") {
					n, v, hasV = "-t", a[2:], true
				}
				if !hasV {
					if i+1 >= len(args) {
						return "", nil, &Refusal{fmt.Sprintf("option %s needs a release", n)}
					}
					i++
					v = args[i]
				}
				if !releaseRe.MatchString(v) {
					return "", nil, &Refusal{fmt.Sprintf("release %q is not a release name", v)}
				}
				out = append(out, "--target-release="+v)
				continue
			}
			if !allowedFlag(a) {
				return "", nil, &Refusal{fmt.Sprintf("option %q is not allowed through the broker", a)}
			}
			out = append(out, a)
		case cmd == "":
			if !commands[a] {
				return "", nil, &Refusal{fmt.Sprintf("command %q is not allowed through the broker (only install, reinstall and update)", a)}
			}
			cmd = a
		default:
			if err := checkPackage(a); err != nil {
				return "", nil, err
			}
			pkgs = append(pkgs, a)
		}
	}
	switch {
	case cmd == "":
		return "", nil, &Refusal{"no command"}
	case cmd == "update" && len(pkgs) > 0:
		return "", nil, &Refusal{"update takes no packages"}
	case cmd != "update" && len(pkgs) == 0:
		return "", nil, &Refusal{cmd + " needs packages"}
	}
	out = append(append(out, cmd, "--"), pkgs...)
	return cmd, out, nil
}

// allowedFlag reports whether a is an allowed flag or a combination of
// allowed short flags.
func allowedFlag(a string) bool {
	if flags[a] {
		return true
	}
	if strings.HasPrefix(a, "--") || len(a) < 2 {
		return false
	}
	return strings.Trim(a[1:], shortFlags) == ""
}

// checkPackage checks one package argument.
func checkPackage(a string) error {
	switch {
	case strings.ContainsAny(a, "/") && (strings.HasPrefix(a, "/") || strings.HasPrefix(a, ".") || strings.HasSuffix(a, ".deb")),
		strings.HasSuffix(a, ".deb"), strings.HasPrefix(a, "."), strings.HasPrefix(a, "~"):
		return &Refusal{fmt.Sprintf("%q is a local file: the broker installs only packages from the archive", a)}
	case strings.HasSuffix(a, "-") || strings.HasSuffix(a, "+"):
		return &Refusal{fmt.Sprintf("%q asks apt to remove or keep a package: the broker only installs", a)}
	case !pkgRe.MatchString(a):
		return &Refusal{fmt.Sprintf("%q is not a Debian package name (name[:arch][=version|/release])", a)}
	}
	return nil
}
