// Package bench holds sandtrail's benchmarks. Each one measures a baseline in
// the same run and reports its result as a ratio against it, so numbers taken
// on a busy or a quiet machine compare like with like. Run them with
// `make bench` (test/bench/run.sh); the results are recorded in
// docs/benchmarks.md. Benchmarks that need root or a kernel feature skip and
// say why.
package bench
