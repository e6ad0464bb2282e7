#!/bin/bash
# Builds `vmio` as it was at an earlier commit, for the guest tests that
# hand over between two builds (tests/guest/handover_test.sh): the commit's
# files (git archive) into CACHE/prev-ID/src, meson and ninja there into
# CACHE/prev-ID/build, the vmio target alone. Cached by the commit: a
# second run finds the stamp and only prints the path. Concurrent runs
# wait for each other (flock).
#
# usage: scripts/guest/build-prev.sh COMMIT [CACHE]
#   COMMIT  any revision of this checkout's repository (resolved to its id)
#   CACHE   default build (the build tree)
# Prints the binary's path. Exit 1 with the reason (and the end of the
# build log) if it cannot be built.
set -euo pipefail

me=build-prev
die() { echo "$me: $*" >&2; exit 1; }
log() { echo "$me: $*" >&2; }
top=$(cd "$(dirname "$0")/../.." && pwd)
(($# >= 1 && $# <= 2)) || { echo "usage: $0 COMMIT [CACHE]" >&2; exit 2; }
rev=$1
cache=${2:-$top/build}
for tool in git meson ninja flock tar; do
	command -v "$tool" >/dev/null || die "'$tool' is missing: run scripts/deps.sh (as root)"
done
id=$(git -C "$top" rev-parse --verify --quiet "$rev^{commit}") ||
	die "no commit $rev in $top (a shallow or foreign checkout?)"
dir=$cache/prev-$id
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
bin=$dir/build/vmio
key="commit $id script $(sha256sum "$0" | cut -d' ' -f1)"
if [[ -f $dir/stamp && $(cat "$dir/stamp") == "$key" && -x $bin ]]; then
	echo "$bin"
	exit 0
fi
start=$SECONDS
log "building vmio at ${id:0:12} in $dir (once per commit)"
rm -rf "$dir/src" "$dir/build" "$dir/stamp"
mkdir "$dir/src"
git -C "$top" archive "$id" | tar -x -C "$dir/src"
{
	meson setup "$dir/build" "$dir/src" -Dguest_tests=false &&
		ninja -C "$dir/build" vmio
} >"$dir/build.log" 2>&1 || die "the build failed; the end of $dir/build.log: $(tail -n 20 "$dir/build.log")"
[[ -x $bin ]] || die "no $bin after the build (see $dir/build.log)"
echo "$key" >"$dir/stamp"
log "built in $((SECONDS - start)) s"
echo "$bin"
