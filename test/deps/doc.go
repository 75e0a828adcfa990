// Package deps holds the test that guards the layers of the tree and what
// the lean packages import. The layers, each importing only those below:
// kernel/ (x/sys only) and resolver/ are leaves; record/ (the event,
// journal, index, query, ingest protocol and views) and policies/ sit on
// them; the producers (collector, dnsproxy, mcpproxy, registry-mirror, shims) on
// those, side by side; daemon/, the composition root, on the producers;
// cmd/ on top. Within them, record/event takes the standard library only,
// record/render that and record/event,
// the eBPF collector no configuration, YAML, SQLite or Debian parser, and
// the shim binary cmd/sandtrail-shim no BPF, SQLite, mirror, collector or
// policy. It lists each import graph with `go list -deps` for every target
// platform, as tailscale's cmd/tailscaled/deps_test.go does, and shows
// with an overlay that a broken layer is reported. It also keeps the
// package table of docs/architecture.md in step with the tree. The package
// has no code of its own.
package deps
