#!/bin/bash
# Runs test_redirect's cases that go through the sockmap engine (as root:
# test_recv_to_stream, where auto picks it, and every test_sockmap_* one)
# RUNS times (default 300), each case as a process of its own bounded by
# SOAK_TIMEOUT seconds (default 120), beside one busy loop per CPU
# (HOGS, default nproc; 0: none), started here and killed on exit. A run
# is one pass over the cases; it fails if any case does. What a failing
# case left (its output, and vmio's log in the harness's directory, kept
# by VMIO_TEST_KEEP) goes to SOAK_LOGS (default BUILD/soak-redirect/),
# with results.tsv (run, case, ok/FAIL/TIMEOUT, seconds) for every case
# run. Ends with "soak: N runs, K failed", then the failing cases.
#   RUNS=300 scripts/soak-redirect.sh build-asan
#   CASES="test_recv_to_stream" HOGS=0 scripts/soak-redirect.sh
# A heavy job: run it under `flock /tmp/vmio-cpu.lock` on a shared machine.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd) || exit 2
runs=${RUNS:-300}
limit=${SOAK_TIMEOUT:-120}
hogs=${HOGS:-$(nproc)}
read -r -a cases <<<"${CASES:-test_recv_to_stream test_sockmap_recv_to_stream test_sockmap_sink_dies test_sockmap_stalled_sink test_sockmap_sink_half_closes_holding}"
logs=${SOAK_LOGS:-$build/soak-redirect}
bin=$build/tests/integration/test_redirect

for f in "$bin" "$build/vmio" "$build/vmio-bad-vmm"; do
	if [ ! -x "$f" ]; then
		echo "soak-redirect: $f is missing (ninja -C $build)" >&2
		exit 2
	fi
done
if [ "$(id -u)" != 0 ]; then
	echo "soak-redirect: needs root, or the cases would not run the sockmap engine" >&2
	exit 2
fi

# As meson test runs the binary, and as scripts/test.sh sets the
# sanitizers: the first error ends the process.
export CMOCKA_MESSAGE_OUTPUT=TAP VMIO_BIN=$build/vmio \
	VMIO_BAD_VMM=$build/vmio-bad-vmm VMIO_TEST_KEEP=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:print_summary=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1:print_summary=1}

# The harness's socket paths live under TMPDIR and must fit sun_path:
# a short directory in /tmp, moved to $logs when a case fails.
work=$(mktemp -d /tmp/soak.XXXXXX)
hog_pids=()
cleanup() {
	local p
	for p in "${hog_pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$logs" || exit 2
results=$logs/results.tsv
printf 'run\tcase\tresult\tseconds\n' >"$results"

for ((h = 0; h < hogs; h++)); do
	sh -c 'while :; do :; done' &
	hog_pids+=($!)
done

# run_case RUN CASE: runs one case; prints ok, FAIL or TIMEOUT.
run_case() {
	local dir=$work/$1 rc
	mkdir -p "$dir"
	TMPDIR=$dir VMIO_TEST_FILTER=$2 timeout -k 5 "$limit" "$bin" \
		>"$dir/test.log" 2>&1
	rc=$?
	# A filter that matches nothing runs nothing and exits 0: the
	# case's own "ok" line is what counts.
	if ((rc == 0)) && grep -q "^ok 1 - $2\$" "$dir/test.log"; then
		echo ok
		rm -rf "$dir"
		return
	fi
	if ((rc == 124 || rc == 137)); then
		echo TIMEOUT
	else
		echo FAIL
	fi
	mv "$dir" "$logs/run$1-$2"
}

start=$SECONDS
failed_runs=0
declare -A failed_cases=()
for ((i = 1; i <= runs; i++)); do
	bad=0
	for c in "${cases[@]}"; do
		t0=$SECONDS
		r=$(run_case "$i" "$c")
		printf '%d\t%s\t%s\t%d\n' "$i" "$c" "$r" $((SECONDS - t0)) >>"$results"
		if [ "$r" != ok ]; then
			bad=1
			failed_cases[$c]=$((${failed_cases[$c]:-0} + 1))
			echo "soak: run $i: $c: $r (kept in $logs/run$i-$c)"
		fi
	done
	failed_runs=$((failed_runs + bad))
	((i % 25 == 0)) && echo "soak: $i runs, $failed_runs failed, $((SECONDS - start)) s"
done

echo "soak: $runs runs, $failed_runs failed ($((SECONDS - start)) s, $hogs hogs, $build)"
for c in "${!failed_cases[@]}"; do
	echo "soak: failed: $c ${failed_cases[$c]} times"
done
((failed_runs == 0))
