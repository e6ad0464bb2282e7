#!/bin/bash
# Runs every libFuzzer target for FUZZ_TIME seconds (default 60) on a copy
# of its seed corpus, and reports executions per second. A crash leaves its
# input in build-fuzz/findings/ and makes the script fail.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
time=${FUZZ_TIME:-60}
dir=build-fuzz
opts=(-Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false -Db_lto=false
      "-Dc_args=-fsanitize=fuzzer-no-link")
if [[ -f $dir/build.ninja ]]; then
	CC=clang meson setup --reconfigure "$dir" "${opts[@]}" >/dev/null || exit 1
else
	CC=clang meson setup "$dir" "${opts[@]}" >/dev/null || exit 1
fi
# Every tests/fuzz/fuzz_*.c is a target (tests/fuzz/meson.build lists them).
targets=()
for f in tests/fuzz/fuzz_*.c; do
	targets+=("$(basename "$f" .c)")
done
ninja -C "$dir" "${targets[@]/#/tests/fuzz/}" || exit 1

status=0
mkdir -p "$dir/findings"
for target in "${targets[@]}"; do
	work=$(mktemp -d)
	cp tests/fuzz/corpus/$target/* "$work/"
	echo "=== $target: ${time}s"
	if ! "$dir/tests/fuzz/$target" -max_total_time="$time" -print_final_stats=1 \
		-artifact_prefix="$dir/findings/$target-" "$work" 2>"$dir/$target.log"; then
		echo "vmio: $target found a problem: see $dir/$target.log" >&2
		status=1
	fi
	grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec' "$dir/$target.log" || true
	rm -rf "$work"
done
exit $status
