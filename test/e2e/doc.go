// Package e2e holds sandtrail's end-to-end tests: they build the sandtrail
// binary, run real sessions with `sandtrail run` and `sandtrail daemon` on
// the real kernel (cgroups, the eBPF collector), and read the record back
// with `sandtrail query`, `timeline` and `verify`, as an operator would.
//
// They need root, cgroups and BPF; without them they skip, saying why.
package e2e
