#!/bin/bash
# Builds vmio twice, plain and with AddressSanitizer and
# UndefinedBehaviorSanitizer, runs the whole suite in each, and ends with
# the line "N passed, M failed" (one count per test program and build).
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:print_summary=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1:print_summary=1}

setup() { # dir, meson options...
	local dir=$1
	shift
	if [[ -f $dir/build.ninja ]]; then
		meson setup --reconfigure "$dir" "$@" >/dev/null
	else
		meson setup "$dir" "$@" >/dev/null
	fi
}

builds=(build build-asan)
setup build || exit 1
setup build-asan -Db_sanitize=address,undefined -Db_lundef=false || exit 1

status=0
for b in "${builds[@]}"; do
	echo "=== $b: building"
	ninja -C "$b" || { echo "vmio: build in $b failed" >&2; status=1; continue; }
	echo "=== $b: testing"
	meson test -C "$b" --print-errorlogs --num-processes 2 "$@" || status=1
done

python3 - "${builds[@]}" <<'PY'
import json, sys
passed = failed = 0
for b in sys.argv[1:]:
    try:
        lines = open(f"{b}/meson-logs/testlog.json").read().splitlines()
    except OSError:
        failed += 1
        print(f"{b}: no test log (build failed?)")
        continue
    for line in lines:
        r = json.loads(line)
        if r["result"] in ("OK", "EXPECTEDFAIL"):
            passed += 1
        else:
            failed += 1
            print(f"FAILED: {b}: {r['name']} ({r['result']})")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
rc=$?
((rc == 0 && status == 0))
