#!/usr/bin/env python3
# usage: scripts/count-tests.py BUILD...
# The suite's count (scripts/test.sh's last line, and the Debian roots'
# test, tests/system/debian_build_test.sh): reads each build's
# meson-logs/testlog.json, names the failed tests, and ends with
# "N passed, M failed"; exits 1 if any failed.
# Counts test cases: a cmocka program reports each case in TAP; any other
# test (a script, a corpus replay) counts as one. A program that failed
# without naming a failed case (it crashed, or timed out) counts one more
# failure, so a crash can never look like a pass.
import json, re, sys
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
        ok = r["result"] in ("OK", "EXPECTEDFAIL")
        out = r.get("stdout") or ""
        oks = len(re.findall(r"^ok \d+", out, re.M))
        bad = len(re.findall(r"^not ok \d+", out, re.M))
        if oks + bad == 0:
            oks, bad = (1, 0) if ok else (0, 1)
        elif not ok and bad == 0:
            bad = 1
        passed += oks
        failed += bad
        if not ok:
            print(f"FAILED: {b}: {r['name']} ({r['result']})")
            # Why, at the end where a short tail of the output (CI's)
            # still shows it: the lines a test script names its failures
            # with ("NAME: FAIL: ...", "not ok", a fuzz target's "FAILED
            # after", a sanitizer's SUMMARY), at most 12 a test.
            why = re.findall(r"^.*(?:: FAIL\b|^not ok \d+|: FAILED after |SUMMARY: ).*$",
                             out + "\n" + (r.get("stderr") or ""), re.M)
            for l in why[:12]:
                print(f"  {l[:300]}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
