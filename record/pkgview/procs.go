package pkgview

import (
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/resolver"
)

// A manager is a kind of real package manager, as a bit of a process's
// ancestry (8 of its 16 are used).
type manager uint16

const (
	mgrNpm manager = 1 << iota
	mgrPip
	mgrCargo
	mgrApt
	mgrDpkg
	// pnpm, yarn and corepack have no shim: every run is around it.
	mgrPnpm
	mgrYarn
	mgrCorepack
)

// managerNames names each manager; those with a shim are named as the
// ecosystem registry names them (resolver.Ecosystem.Manager), and
// managerOf knows every command of theirs, as a test checks.
var managerNames = map[manager]string{mgrNpm: "npm", mgrPip: "pip", mgrCargo: "cargo", mgrApt: "apt", mgrDpkg: "dpkg",
	mgrPnpm: "pnpm", mgrYarn: "yarn", mgrCorepack: "corepack"}

var (
	pipExe    = regexp.MustCompile(`^pip[0-9.]*$`)
	pythonExe = regexp.MustCompile(`^python[0-9.]*$`)
	nodeExe   = regexp.MustCompile(`^node(js)?[0-9]*$`)
)

// corepackEntry is a file corepack runs a package manager from: its own
// corepack.js and the one per manager that `corepack enable` links.
var corepackEntry = regexp.MustCompile(`/corepack/dist/(corepack|npm|npx|pnpm|pnpx|yarn|yarnpkg)\.js$`)

// managerOfFile says which package manager a script node runs is the
// entry script of, by its path: npm's bin/npm-cli.js and
// bin/npx-cli.js, corepack's dist entries, pnpm's bin/pnpm.cjs, yarn's
// bin/yarn.js and a yarn release (yarn-4.1.0.cjs).
func managerOfFile(p string) manager {
	switch base := path.Base(p); {
	case p == "":
		return 0
	case base == "npm-cli.js" || base == "npx-cli.js":
		return mgrNpm
	case corepackEntry.MatchString(p):
		return mgrCorepack
	case base == "pnpm.cjs":
		return mgrPnpm
	case base == "yarn.js" || base == "yarn.cjs" || yarnRelease.MatchString(base):
		return mgrYarn
	}
	return 0
}

var yarnRelease = regexp.MustCompile(`^yarn-[0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.+-]*\.c?js$`)

// managerOf says which real package manager a process.exec runs, from the
// name it was run by and, for interpreters, argv (the third signal, after
// the mirror's fetches and the kernel's record of the managers' modules
// read, checkModuleRead): npm and npx
// (also node running npm-cli.js, npx-cli.js or a bin/npm), pip and pip3
// (also python running a pip script, or python -m pip), cargo, apt and
// apt-get, dpkg, pnpm, yarn and corepack (also node running their entry
// scripts). A script's shebang makes the kernel record the script first,
// then the interpreter it names through /usr/bin/env: both match.
func managerOf(exe string, argv []string) manager {
	exe, argv = loadedProgram(exe, argv)
	switch base := path.Base(exe); {
	case base == "npm" || base == "npx":
		return mgrNpm
	case base == "pnpm" || base == "pnpx":
		return mgrPnpm
	case base == "yarn" || base == "yarnpkg":
		return mgrYarn
	case base == "corepack":
		return mgrCorepack
	case pipExe.MatchString(base):
		return mgrPip
	case base == "cargo":
		return mgrCargo
	case base == "apt" || base == "apt-get":
		return mgrApt
	case base == "dpkg":
		return mgrDpkg
	case nodeExe.MatchString(base) && len(argv) > 1:
		script := argv[1]
		for _, s := range []string{"npm-cli.js", "npx-cli.js", "/bin/npm", "/bin/npx"} {
			if strings.HasSuffix(script, s) {
				return mgrNpm
			}
		}
		if script == "npm" || script == "npx" {
			return mgrNpm
		}
		return managerOfFile(script)
	case pythonExe.MatchString(base):
		if pythonRunsPip(argv) {
			return mgrPip
		}
	}
	return 0
}

// dynamicLoader names the dynamic loader run as a program
// (ld-linux-x86-64.so.2, ld-linux-aarch64.so.1, ld-musl-x86_64.so.1,
// ld.so), which runs the program its argv names.
var dynamicLoader = regexp.MustCompile(`^(ld-linux[A-Za-z0-9_.-]*\.so(\.[0-9]+)*|ld-musl-[A-Za-z0-9_]+\.so(\.[0-9]+)*|ld\.so(\.[0-9]+)*)$`)

// loaderValueOptions are the dynamic loader's options that take a value.
var loaderValueOptions = map[string]bool{"--library-path": true, "--preload": true, "--audit": true, "--argv0": true,
	"--inhibit-rpath": true, "--glibc-hwcaps-prefix": true, "--glibc-hwcaps-mask": true}

// loadedProgram is the program an exec runs: for the dynamic loader run as
// a program (`/lib64/ld-linux-x86-64.so.2 /usr/bin/node npm-cli.js`), the
// program its argv names after the loader's own options, with that
// program's argv; otherwise exe and argv as they are.
func loadedProgram(exe string, argv []string) (string, []string) {
	if !dynamicLoader.MatchString(path.Base(exe)) {
		return exe, argv
	}
	for i := 1; i < len(argv); i++ {
		switch a := argv[i]; {
		case a == "--":
			if i+1 < len(argv) {
				return argv[i+1], argv[i+1:]
			}
			return exe, argv
		case loaderValueOptions[a]:
			i++
		case strings.HasPrefix(a, "--"):
		default:
			return a, argv[i:]
		}
	}
	return exe, argv
}

// interpreterOf says whose entry modules a process.exec's image can run,
// by the file the kernel executed (or, without it, the name it was run
// by): node runs npm's, pnpm's, yarn's and corepack's, python pip's.
func interpreterOf(pr *event.Proc) manager {
	exe := pr.ExePath
	if exe == "" {
		exe = pr.Exe
	}
	exe, _ = loadedProgram(exe, pr.Argv)
	switch base := path.Base(exe); {
	case nodeExe.MatchString(base):
		return mgrNpm | mgrPnpm | mgrYarn | mgrCorepack
	case pythonExe.MatchString(base):
		return mgrPip
	}
	return 0
}

// IsManagerModule reports whether the package view counts a read of the
// file p as a package manager's core module (managerModule): the host,
// which has the kernel record the reads, lists only such files.
func IsManagerModule(p string) bool { return managerModule(p) != 0 }

// managerModule says which package manager a module is the core of, by its
// path: npm's lib/cli.js and lib/npm.js (every npm and npx command loads
// them, whatever file started it), pip's pip/_internal/cli/ (its main and
// base command, source or compiled), and corepack's dist/lib/corepack.cjs.
// The kernel records their reads where the host asked it to (daemon
// lists the installed managers' modules): an interpreter that reads one
// with no shim above it runs that manager around its shim, whatever the
// script that started it is named.
func managerModule(p string) manager {
	switch {
	case strings.HasSuffix(p, "/npm/lib/cli.js") || strings.HasSuffix(p, "/npm/lib/npm.js"):
		return mgrNpm
	case strings.Contains(p, "/pip/_internal/cli/"):
		return mgrPip
	case strings.HasSuffix(p, "/corepack/dist/lib/corepack.cjs"):
		return mgrCorepack
	}
	return 0
}

// pythonRunsPip reports whether a python argv runs pip: a pip script as
// its first argument, or -m pip (also -mpip, -Im pip, -m pip._internal)
// among the options before it.
func pythonRunsPip(argv []string) bool {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			return i+1 < len(argv) && pipExe.MatchString(path.Base(argv[i+1]))
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			return pipExe.MatchString(path.Base(a))
		}
		if strings.HasPrefix(a, "--") {
			continue
		}
		// A cluster of one-letter options: -c and -m end it, -X and -W
		// take a value.
		for j := 1; j < len(a); j++ {
			switch a[j] {
			case 'm':
				mod := a[j+1:]
				if mod == "" && i+1 < len(argv) {
					mod = argv[i+1]
				}
				return mod == "pip" || strings.HasPrefix(mod, "pip.")
			case 'c':
				return false
			case 'X', 'W':
				if j == len(a)-1 {
					i++
				}
				j = len(a)
			}
		}
	}
	return false
}

// isShim reports whether the executable exe (as the kernel recorded it,
// relative to cwd if relative) is a shim: in the shim directory, or one of
// the named shim executables. The path is cleaned first, so that
// "<shimdir>/../../usr/bin/npm" is not in the shim directory.
func (o *options) isShim(exe, cwd string) bool {
	if exe == "" {
		return false
	}
	if !path.IsAbs(exe) {
		exe = path.Join(cwd, exe)
	}
	exe = path.Clean(exe)
	dir := path.Clean(o.shimDir)
	return o.shimDir != "" && strings.HasPrefix(exe, dir+"/") || slices.Contains(o.shimExes, exe)
}

// A claim is a package that a process's exec names as the one whose
// script it runs.
type claim struct {
	eco, name, match string
}

var (
	cargoBuild  = regexp.MustCompile(`/build/([A-Za-z0-9_-]+)-[0-9a-f]{8,}/(build-script-build|build_script_build-[0-9a-f]+)$`)
	pipBuildDir = regexp.MustCompile(`/pip-install-[^/]+/([A-Za-z0-9._-]+?)(_[0-9a-f]{32})?(/|$)`)
	pipReqBuild = regexp.MustCompile(`/(pip-req-build-[^/]+)(/|$)`)
	dpkgScript  = regexp.MustCompile(`^/var/lib/dpkg/info/([a-z0-9][a-z0-9+.-]*)(:[a-z0-9-]+)?\.(preinst|postinst|prerm|postrm)$`)
)

// claimOf says which package's script a process.exec runs, given which
// managers its ancestors are: an npm lifecycle script (under npm, with a
// cwd in node_modules/<name>), a cargo build script (its executable in
// build/<crate>-<hash>/), a pip sdist build (python under pip, in or
// naming an unpacked sdist directory), or a dpkg maintainer script
// (/var/lib/dpkg/info/<pkg>.postinst, run directly or by a shell).
func claimOf(under manager, exe string, argv []string, cwd string) (claim, bool) {
	if under&mgrNpm != 0 {
		if n, ok := nodeModule(cwd); ok {
			return claim{resolver.NPM, n, MatchNpm}, true
		}
	}
	if strings.Contains(exe, "/build/") { // cargoBuild's, tested first: the regexp is the costly part of an exec
		if m := cargoBuild.FindStringSubmatch(exe); m != nil {
			return claim{resolver.Cargo, m[1], MatchCargo}, true
		}
	}
	if under&mgrPip != 0 && pythonExe.MatchString(path.Base(exe)) {
		if c, ok := pipClaim(argv, cwd); ok {
			return c, true
		}
	}
	for _, p := range append([]string{exe}, argv[min(1, len(argv)):min(2, len(argv))]...) {
		if !strings.Contains(p, "/info/") { // in every path that cleans to a dpkgScript
			continue
		}
		if m := dpkgScript.FindStringSubmatch(path.Clean(p)); m != nil {
			return claim{resolver.Deb, m[1], MatchDpkg}, true
		}
	}
	return claim{}, false
}

// nodeModule is the package whose directory cwd is in: the segment (two
// for an @scope) after the last node_modules.
func nodeModule(cwd string) (string, bool) {
	i := strings.LastIndex(cwd, "/node_modules/")
	if i < 0 {
		return "", false
	}
	segs := strings.Split(cwd[i+len("/node_modules/"):], "/")
	switch {
	case segs[0] == "" || segs[0] == "." || segs[0] == ".." || segs[0] == ".bin":
		return "", false
	case strings.HasPrefix(segs[0], "@"):
		if len(segs) < 2 || segs[1] == "" {
			return "", false
		}
		return segs[0] + "/" + segs[1], true
	}
	return segs[0], true
}

// pipClaim finds the unpacked sdist that a python process under pip
// builds: named in its cwd or argv (pip-install-*/<name>_<hash>, or an
// unnamed pip-req-build-*, which stands for the package), or, for a build
// hook (_in_process.py) or setup.py run elsewhere, such as an in-tree
// build of a local directory, the directory it runs in.
func pipClaim(argv []string, cwd string) (claim, bool) {
	for _, s := range append([]string{cwd + "/"}, argv...) {
		if m := pipBuildDir.FindStringSubmatch(s); m != nil {
			return claim{resolver.PyPI, m[1], MatchPip}, true
		}
		if m := pipReqBuild.FindStringSubmatch(s); m != nil {
			return claim{resolver.PyPI, m[1], MatchPip}, true
		}
	}
	for _, a := range argv[min(1, len(argv)):] {
		if strings.HasSuffix(a, "/_in_process.py") || path.Base(a) == "setup.py" {
			if dir := path.Base(path.Clean(cwd)); cwd != "" && dir != "/" && dir != "." {
				return claim{resolver.PyPI, dir, MatchPip}, true
			}
		}
	}
	return claim{}, false
}

// sensitivePaths are the credential and secret files whose access by a
// package's script is marked: a path containing one of them is sensitive.
// This is the one list.
var sensitivePaths = []string{
	"/.npmrc", "/.yarnrc", "/.pypirc", "/.pip/pip.conf", "/.config/pip/", "/.cargo/credentials",
	"/.git-credentials", "/.gitconfig", "/.netrc", "/.ssh/", "/.gnupg/", "/.aws/", "/.azure/",
	"/.config/gcloud/", "/.config/gh/", "/.kube/config", "/.docker/config.json",
	"/etc/shadow", "/etc/gshadow", "/etc/sudoers",
}

// Sensitive reports whether a script touching path is worth a look: a
// credential or secret file of a package registry, git, ssh, a cloud or
// the system, or a process's environment (/proc/<pid>/environ).
func Sensitive(p string) bool {
	for _, s := range sensitivePaths {
		if strings.Contains(p, s) {
			return true
		}
		// A directory entry also matches the directory itself.
		if dir, ok := strings.CutSuffix(s, "/"); ok && strings.HasSuffix(p, dir) {
			return true
		}
	}
	return strings.HasPrefix(p, "/proc/") && strings.HasSuffix(p, "/environ")
}
