// Package bench holds sandtrail's benchmarks. Each one measures a baseline in
// the same run and reports its result as a ratio against it, so numbers taken
// on a busy or a quiet machine compare like with like. Run them with
// `make bench` (test/bench/run.sh, whose plan names every benchmark with its
// -benchtime); the run regenerates the tables and charts of
// docs/benchmarks.md (test/bench/report). Benchmarks that need root or a
// kernel feature skip and say why.
//
// The servers the benchmarks start (sandtrail's mirror and daemon, nginx,
// Verdaccio) run in process groups of their own and are stopped by group
// (startServer); TestMain fails the run if any process the benchmarks
// started is still running after them.
package bench
