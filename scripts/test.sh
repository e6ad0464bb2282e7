#!/bin/bash
# Builds vmio three times: plain, with AddressSanitizer and
# UndefinedBehaviorSanitizer, and with ThreadSanitizer; runs the whole
# suite in the first two and the unit and integration tests (where the
# worker threads are) in the third, but for the integration tests'
# variants (suite 'variant': the same cases over packed rings, without
# IN_ORDER, without a guest's limits), which change nothing between
# threads. Then builds the libFuzzer targets with
# clang (build-fuzz, as `make fuzz` does) and runs each for
# FUZZ_TEST_SECONDS (default 5; 0 skips it) from its corpus: a check that
# no longer holds fails the suite there (a test case per target). Ends
# with the line "N passed, M failed" (one count per test case and build).
# Arguments go to meson test (which tests to run) and skip the fuzzing.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:print_summary=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1:print_summary=1}
# A race ends the process that has it: a vmio under test then fails its
# test, whatever the test was looking at.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:second_deadlock_stack=1}

setup() { # dir, meson options...
	local dir=$1
	shift
	if [[ -f $dir/build.ninja ]]; then
		meson setup --reconfigure "$dir" "$@" >/dev/null
	else
		meson setup "$dir" "$@" >/dev/null
	fi
}

builds=(build build-asan build-tsan)
setup build || exit 1
# The sanitizer builds link without LTO (meson.build turns it on): it
# only slows their link, and their figures are not measured.
setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Db_lto=false -Dguest_tests=false || exit 1
# gcc's TSan cannot instrument __atomic_thread_fence, and says so: the
# fences in src/virtio order our ring accesses against the guest's, which
# is another process that TSan cannot see anyway.
setup build-tsan -Db_sanitize=thread -Db_lundef=false -Db_lto=false -Dguest_tests=false -Dc_args=-Wno-tsan || exit 1

suites() { # build: the meson test arguments that pick its suites
	[[ $1 == build-tsan ]] && echo "--suite unit --suite integration --no-suite variant"
}

status=0
for b in "${builds[@]}"; do
	echo "=== $b: building"
	ninja -C "$b" || { echo "vmio: build in $b failed" >&2; status=1; continue; }
	echo "=== $b: testing"
	# shellcheck disable=SC2046
	meson test -C "$b" --print-errorlogs --num-processes 2 $(suites "$b") "$@" || status=1
done

# Two targets at a time, as the builds' tests run: about a minute to
# build them and FUZZ_TEST_SECONDS * 5 to run the nine.
fuzz_seconds=${FUZZ_TEST_SECONDS:-5}
if ((fuzz_seconds > 0 && $# == 0)); then
	echo "=== build-fuzz: building the fuzz targets"
	if scripts/fuzz.sh build; then
		echo "=== build-fuzz: fuzzing each target for ${fuzz_seconds}s"
		FUZZ_TEST_SECONDS=$fuzz_seconds meson test -C build-fuzz \
			--no-rebuild --print-errorlogs --num-processes 2 \
			--suite fuzz_run || status=1
	else
		echo "vmio: build in build-fuzz failed" >&2
		status=1
		rm -f build-fuzz/meson-logs/testlog.json
	fi
	builds+=(build-fuzz)
fi

python3 scripts/count-tests.py "${builds[@]}"
rc=$?
((rc == 0 && status == 0))
