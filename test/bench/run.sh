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
set -euo pipefail
cd "$(dirname "$0")/../.."

bench="${BENCH:-.}"
benchtime="${BENCHTIME:-3x}"
mkdir -p test/bench/results
out="test/bench/results/bench-$(date -u +%Y%m%dT%H%M%SZ).txt"

{
	echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
	go test -run '^$' -bench "$bench" -benchtime "$benchtime" -timeout 60m ./test/bench/ ./record/event/
} 2>&1 | tee "$out"
echo "bench: results in $out"
