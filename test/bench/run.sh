#!/usr/bin/env bash
# run.sh runs every sandtrail benchmark, keeps the raw output under
# test/bench/results/, and regenerates the tables and charts of
# docs/benchmarks.md from it (test/bench/report). It is what `make bench`
# runs.
#
# The plan below names every benchmark with the -benchtime it runs at:
# the comparisons that interleave rounds of their own (the collector, the
# mirror, the sessions) run one iteration, whose rounds are the figure;
# the others run enough iterations for a stable figure and no more. A
# benchmark that is not in the plan is not run: a test
# (TestRunPlanNamesEveryBenchmark) keeps the plan and the code in step.
#
# Environment:
#   BENCH       an extended regexp: run only the plan's benchmarks whose
#               name it matches (default: all)
#   BENCHTIME   overrides every -benchtime of the plan
#   SANDTRAIL_BENCH_EVENTS  events in the index, hunt and central
#               questions benchmarks' record (default 10^7; the generated
#               SQLite databases are cached in test/bench/results/, the
#               central store's PostgreSQL is loaded again each run)
#   SANDTRAIL_BENCH_PAIRS   overrides the rounds of every interleaved
#               benchmark (each has its own default)
#   REPORT      unset: regenerate docs/benchmarks.md and docs/bench/ when
#               the whole plan ran and no benchmark failed; 1: regenerate
#               them whatever ran (the regions of benchmarks that did not
#               run, the targets and the run's line keep what they had);
#               0: never
set -euo pipefail
cd "$(dirname "$0")/../.."

# plan: package, benchmark (a top-level name), -benchtime, and the
# environment it runs with (the rounds of the interleaved ones, chosen so
# that the whole plan takes under 20 minutes on the project's 2-core
# machine; SANDTRAIL_BENCH_PAIRS, when set, overrides them).
plan='
test/bench   BenchmarkCollectorExecStorm  1x  SANDTRAIL_BENCH_SLICES=10
test/bench   BenchmarkCollectorFiles      1x  SANDTRAIL_BENCH_PAIRS=3
test/bench   BenchmarkCollectorHTTP       1x  SANDTRAIL_BENCH_WRK_DURATION=3s
test/bench   BenchmarkCollectorSyscalls   1x  SANDTRAIL_BENCH_PAIRS=3
test/bench   BenchmarkCollectorTracers    1x
test/bench   BenchmarkShimVersion         3x
test/bench   BenchmarkShimInstall         5x
test/bench   BenchmarkMirrorInstall       1x  SANDTRAIL_BENCH_PAIRS=3
test/bench   BenchmarkMirrorThroughput    1x  SANDTRAIL_BENCH_WRK_DURATION=3s
test/bench   BenchmarkIngest              1x
test/bench   BenchmarkJournalAppend       1x
test/bench   BenchmarkJournalVerify       2x
test/bench   BenchmarkIndexQuestions      20x
test/bench   BenchmarkHunt                5x
test/bench   BenchmarkSessionLifecycle    100x
test/bench   BenchmarkSessionPauseResume  100x
test/bench   BenchmarkRunJournalSize      1x
test/bench   BenchmarkRunTrue             5x
test/bench   BenchmarkRunNpmInstall       1x  SANDTRAIL_BENCH_PAIRS=3
test/bench   BenchmarkDetectorAdd         20000x
test/bench   BenchmarkAlertLatency        5000x
test/bench   BenchmarkWatcherAdd          1000000x
test/bench   BenchmarkSinkLatency         1x
test/bench   BenchmarkIngestWithSinks     1x
test/bench   BenchmarkCentralIngest       1x
test/bench   BenchmarkCentralQuestions    20x
test/bench   BenchmarkMCPProxy            2000x
test/bench   BenchmarkDNSProxy            2000x
test/bench   BenchmarkPolicyDecisions     1s
test/bench   BenchmarkPolicyLoad          1s
test/bench   BenchmarkQueueEmit           1000000x
test/bench   BenchmarkQueueJournal        3x
test/bench   BenchmarkResolverMatch       1s
test/bench   BenchmarkResolverBest        1s
record/event BenchmarkUnmarshal           1s
record/event BenchmarkMarshal             1s
record/event BenchmarkRedact              1s
record/event BenchmarkRedactRatio         1s
record/event BenchmarkRedactArgv          1s
'

if [ "${1:-}" = --plan ]; then # the plan, for TestRunPlanNamesEveryBenchmark
	echo "$plan" | awk 'NF >= 3 { print $1, $2 }'
	exit 0
fi

bench="${BENCH:-}"
mkdir -p test/bench/results
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
out="test/bench/results/bench-$stamp.txt"
log="test/bench/results/bench-$stamp.log"
bins="test/bench/results/bin"
mkdir -p "$bins"

# The benchmarks' own output (the lines that test/bench/report reads) goes
# to $out; what the servers and tools they start write to stderr goes to
# $log, so that it cannot break a result line.
start=$(date +%s)
echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out"
for pkg in test/bench record/event; do
	go test -c -o "$bins/$(basename "$pkg").test" "./$pkg" 2>&1 | tee -a "$log"
done
all=1
failed=()
while read -r pkg name benchtime vars; do
	[ -n "$name" ] || continue
	if [ -n "$bench" ] && ! [[ $name =~ $bench ]]; then
		all=0
		continue
	fi
	t0=$(date +%s)
	env=()
	for v in $vars; do
		case "$v" in
		SANDTRAIL_BENCH_PAIRS=*) [ -n "${SANDTRAIL_BENCH_PAIRS:-}" ] || env+=("$v") ;;
		*) env+=("$v") ;;
		esac
	done
	echo "# $name -benchtime ${BENCHTIME:-$benchtime} ${env[*]}" >>"$out"
	(cd "$pkg" && env "${env[@]}" "$OLDPWD/$bins/$(basename "$pkg").test" -test.run '^$' -test.bench "^$name\$" \
		-test.benchtime "${BENCHTIME:-$benchtime}" -test.timeout 30m) 2>>"$log" | tee -a "$out" ||
		failed+=("$name")
	echo >>"$out" # ends a result line that a crash left open
	echo "# $name took $(($(date +%s) - t0)) s" | tee -a "$out"
done <<<"$plan"
echo "# total $(($(date +%s) - start)) s" | tee -a "$out"
echo "bench: results in $out (servers' stderr in $log)"

partial=
[ "$all" = 1 ] && [ "${#failed[@]}" -eq 0 ] || partial=-partial
if [ "${REPORT:-}" = 1 ] || { [ -z "${REPORT:-}" ] && [ -z "$partial" ]; }; then
	go run ./test/bench/report $partial -doc docs/benchmarks.md -charts docs/bench "$out"
	echo "bench: regenerated docs/benchmarks.md and docs/bench/ from $out"
fi
if [ "${#failed[@]}" -gt 0 ]; then
	echo "bench: FAIL: ${failed[*]} (see $out and $log)" >&2
	exit 1
fi
