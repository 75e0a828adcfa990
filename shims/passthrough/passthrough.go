// Package passthrough is the shim's fast path, run from its init function:
// when sandtrail-shim is run as a package manager for a call on the fast
// path's allowlist (front.ReadOnly), it replaces itself with the real
// manager (front.Lookup) before the packages that only an install needs
// are initialized. Go initializes a package as soon as its imports are,
// in import-path order, so this one, importing only os, syscall and
// shims/front, runs after the Go runtime and os and before net, unicode,
// crypto's FIPS module, encoding/json, regexp and the shim's planners.
//
// Anything else, or anything unclear (no real manager found, a relative
// SANDTRAIL_REAL_<NAME>, a failed exec), returns, and the shim's main runs
// the call as it always has (docs/shims.md). The exec is the one the shim
// makes for a call without install intent: same argv, same environment,
// same dispositions (Go has already installed its handlers, which exec
// resets to the default; an inherited SIG_IGN of SIGHUP or SIGINT stays).
//
// Only cmd/sandtrail-shim may import this package, since its init execs
// whatever binary imports it when that binary is run by a manager's name;
// a test checks the module's importers.
package passthrough

import (
	"os"
	"syscall"

	"github.com/sandtrail/sandtrail/shims/front"
)

func init() {
	pass(os.Args)
}

// pass execs the real manager for a read-only call, and returns when argv
// is not one or the exec cannot be made.
func pass(argv []string) {
	if len(argv) == 0 {
		return
	}
	name := front.Name(argv[0])
	if !front.ReadOnly(name, argv[1:]) {
		return
	}
	real := os.Getenv(front.RealEnv(name))
	if real == "" {
		self, err := os.Stat("/proc/self/exe")
		if err != nil {
			return
		}
		p, ok := front.Lookup(name, os.Getenv("PATH"), self)
		if !ok {
			return
		}
		real = p
	}
	if real[0] != '/' {
		return
	}
	_ = syscall.Exec(real, argv, os.Environ())
}
