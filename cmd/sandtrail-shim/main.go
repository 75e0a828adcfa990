// Command sandtrail-shim stands in for the package managers in a sandbox:
// linked as each command of the ecosystem registry's package managers (npm,
// npx, pip, pip3, cargo, apt, apt-get; `sandtrail-shim list`) in the shim
// directory (/usr/local/lib/sandtrail/shims, first on PATH), it checks an
// install against the daemon's policy, runs the real manager transparently
// and records what it resolved (docs/shims.md). It dispatches on argv[0].
//
// Called by its own name it has helper commands:
//
//	sandtrail-shim apt-hook OUT   apt's DPkg::Pre-Install-Pkgs hook (version 3)
//	sandtrail-shim list           the managers it stands in for
//
// It is lean on purpose (a deps test keeps it so): it runs before every
// package-manager call the agent makes. A call on the fast path's
// allowlist (shims/front.ReadOnly: `npm --version`, `pip list`) never
// reaches main: shims/passthrough's init execs the real manager before
// the rest of the binary is initialized.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandtrail/sandtrail/resolver/ecosystem"
	"github.com/sandtrail/sandtrail/shims"
	"github.com/sandtrail/sandtrail/shims/apt"
	"github.com/sandtrail/sandtrail/shims/cargo"
	"github.com/sandtrail/sandtrail/shims/npm"
	"github.com/sandtrail/sandtrail/shims/pip"

	// The fast path: its init execs a read-only call straight through.
	_ "github.com/sandtrail/sandtrail/shims/passthrough"
)

// plans are how the shim runs each command it stands in for. The commands,
// the managers they run and their ecosystems are the registry's
// (ecosystem.List), in its order; a test checks that every command of the
// registry has a plan here and that nothing else does.
var plans = map[string]shims.Manager{
	"npm":     {Plan: npm.Plan},
	"npx":     {Plan: npm.PlanNpx},
	"pip":     {Plan: pip.Plan},
	"pip3":    {Plan: pip.Plan},
	"cargo":   {Plan: cargo.Plan},
	"apt":     {Plan: apt.Plan, Delegate: apt.Delegate},
	"apt-get": {Plan: apt.Plan, Delegate: apt.Delegate},
}

// managers is the one ordered list of the commands the shim stands in for;
// install.sh links one name per entry (`sandtrail-shim list`).
var managers = standIns(ecosystem.List(), plans)

// standIns is each command of infos that plans has a plan for, in order,
// with its manager and ecosystem.
func standIns(infos []ecosystem.Info, plans map[string]shims.Manager) []shims.Manager {
	var out []shims.Manager
	for _, e := range infos {
		for _, c := range e.Commands() {
			if m, ok := plans[c]; ok {
				m.Name, m.Manager, m.Ecosystem = c, e.Manager, e.Name
				out = append(out, m)
			}
		}
	}
	return out
}

func main() {
	os.Exit(run(os.Args))
}

func run(argv []string) int {
	name := filepath.Base(argv[0])
	for _, m := range managers {
		if m.Name == name {
			self, err := os.Executable()
			if err == nil {
				self, err = filepath.EvalSymlinks(self)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "sandtrail: finding the shim's own executable: %v\n", err)
				return shims.ExitNotFound
			}
			s := &shims.Shim{Self: self, Getenv: os.Getenv, Environ: os.Environ, Stderr: os.Stderr}
			return s.Run(m, argv)
		}
	}
	return helper(argv)
}

// helper runs the shim's own commands.
func helper(argv []string) int {
	cmd := ""
	if len(argv) > 1 {
		cmd = argv[1]
	}
	switch cmd {
	case "apt-hook":
		if len(argv) != 3 {
			fmt.Fprintln(os.Stderr, "usage: sandtrail-shim apt-hook OUT (apt runs it as its DPkg::Pre-Install-Pkgs hook)")
			return 2
		}
		if err := apt.RunHook(os.Stdin, argv[2]); err != nil {
			fmt.Fprintf(os.Stderr, "sandtrail apt hook: %v\n", err)
			return 1
		}
		return 0
	case "list":
		for _, m := range managers {
			fmt.Println(m.Name)
		}
		return 0
	}
	var names []string
	for _, m := range managers {
		names = append(names, m.Name)
	}
	fmt.Fprintf(os.Stderr, `sandtrail-shim stands in for package managers: link it as one of
  %s
in the shim directory (install.sh does), first on PATH. See docs/shims.md.

Its own commands:
  sandtrail-shim apt-hook OUT   apt's DPkg::Pre-Install-Pkgs hook (version 3)
  sandtrail-shim list           the names it stands in for
`, strings.Join(names, " "))
	if cmd == "-h" || cmd == "--help" || cmd == "help" {
		return 0
	}
	return 2
}
