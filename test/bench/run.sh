#!/usr/bin/env bash
# run.sh runs every sandtrail benchmark and keeps the raw output under
# test/bench/results/. It is what `make bench` runs.
#
# Environment:
#   BENCH       a regexp selecting benchmarks (default: all)
#   BENCHTIME   passed to -benchtime (default 3x: each benchmark reports its
#               own same-run baseline, so a few iterations are enough)
#   SANDTRAIL_BENCH_EVENTS  events in the index benchmark's record (default 10^7;
#               the generated database is cached in test/bench/results/)
#   SANDTRAIL_BENCH_PAIRS   rounds of the interleaved benchmarks (each has its
#               own default)
#
# BenchmarkRunNpmInstall (npm install of a 146-package tree in a session
# against the same install outside one) runs on its own at -benchtime 1x: one
# iteration is already several minutes of interleaved rounds (BENCH selects
# it when it is the default or names RunNpm).
set -euo pipefail
cd "$(dirname "$0")/../.."

bench="${BENCH:-.}"
benchtime="${BENCHTIME:-3x}"
mkdir -p test/bench/results
out="test/bench/results/bench-$(date -u +%Y%m%dT%H%M%SZ).txt"

{
	echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
	go test -run '^$' -bench "$bench" -skip '^BenchmarkRunNpmInstall$' -benchtime "$benchtime" -timeout 60m ./test/bench/ ./record/event/
	case "$bench" in
	. | *RunNpm*) go test -run '^$' -bench "$bench" -skip '^Benchmark([^R]|R[^u]|Ru[^n]|Run[^N])' -benchtime 1x -timeout 30m ./test/bench/ ;;
	esac
} 2>&1 | tee "$out"
echo "bench: results in $out"
