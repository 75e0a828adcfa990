// Package demo holds the test of scripts/demo.sh, the script `make demo`
// runs after installing sandtrail: it runs the script as `make demo` does,
// but with the sandtrail and sandtrail-shim of this tree, built for the
// test, and a data directory of its own, so nothing is installed and the
// machine's record is not touched, and checks what a security engineer
// reads in its output: the packages, no alerts, the refusals, verify, and
// no warnings.
//
// The demo needs root, the eBPF collector, the agent user, python3, pip,
// npm (with the npm registry in reach) and ip; without them the test skips,
// saying why. The package has no code of its own.
package demo
