#!/bin/bash
# Runs one libFuzzer target for SECONDS (default $FUZZ_TEST_SECONDS, else
# 5) on a copy of its seed corpus, so the stored seeds are never touched.
# Prints one line: the target, the time, its executions and the result.
# A crash, leak, sanitizer report or input slower than PER_INPUT seconds
# fails the run; its input is kept as FINDINGS/<target>-<kind>-<hash> and
# named, with the end of libFuzzer's report, so the failure can be
# replayed (`<binary> <input>`). libFuzzer's whole log is FINDINGS/<target>.log.
#
# Usage: run_target.sh BINARY CORPUS FINDINGS [SECONDS]
# (make fuzz runs it for minutes per target, make test for seconds.)
set -uo pipefail

bin=$1 corpus=$2 findings=$3
seconds=${4:-${FUZZ_TEST_SECONDS:-5}}
per_input=${FUZZ_PER_INPUT_SECONDS:-60}
target=$(basename "$bin")

mkdir -p "$findings"
log=$findings/$target.log
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$corpus"/* "$work/" || exit 1

start=$(date +%s)
"$bin" -max_total_time="$seconds" -timeout="$per_input" -print_final_stats=1 \
	-artifact_prefix="$findings/$target-" "$work" >"$log" 2>&1
rc=$?
took=$(($(date +%s) - start))
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")

if ((rc == 0)); then
	echo "$target: ${took}s, ${runs:-?} executions (${rate:-?}/s), clean"
	exit 0
fi
# libFuzzer names the input it kept: "Test unit written to PATH".
input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
echo "$target: FAILED after ${took}s (exit $rc); input: ${input:-none kept}; log: $log"
tail -n 40 "$log" >&2
exit 1
