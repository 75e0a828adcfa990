// Package deps holds the test that guards what the lean packages import:
// record/event (the standard library only), record/render (that and
// record/event), the eBPF collector (no policy engine, configuration,
// YAML, SQLite, Debian parser or mirror) and the shim binary
// cmd/sandtrail-shim (no BPF, SQLite, mirror or collector). It lists each
// package's import graph with `go list -deps` for every target platform,
// as tailscale's cmd/tailscaled/deps_test.go does. The package has no code
// of its own.
package deps
