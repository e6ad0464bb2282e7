#!/bin/bash
# Runs every libFuzzer target for FUZZ_TIME seconds (default 60) on a copy
# of its seed corpus, and reports each one's time, executions and result.
# A crash leaves its input in build-fuzz/findings/ and makes the script
# fail (tests/fuzz/run_target.sh runs each target).
# `fuzz.sh build` only builds the targets (scripts/test.sh then runs them
# for a few seconds each, as the fuzz_run suite).
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
# Only they are built: the rest of the tree in this build is not tested.
targets=()
for f in tests/fuzz/fuzz_*.c; do
	targets+=("$(basename "$f" .c)")
done
ninja -C "$dir" "${targets[@]/#/tests/fuzz/}" || exit 1
[[ ${1:-} == build ]] && exit 0

status=0
for target in "${targets[@]}"; do
	tests/fuzz/run_target.sh "$dir/tests/fuzz/$target" \
		"tests/fuzz/corpus/$target" "$dir/findings" "$time" || status=1
done
exit $status
