#!/bin/bash
# Instructions `vmio net --null` executes per frame, counted by callgrind,
# with dirty-page logging off and on (issue 24): what logging costs the
# data path while a migration runs, and what its being there costs when
# it is off, against a build from before it (BASE). Counts do not move
# with the machine's load, where timed runs on this shared machine swing
# up to 4x.
#
# usage: [BASE=DIR] scripts/callgrind-net.sh [BUILD_DIR]   (default: build)
# Env: BASE (the build directory of another commit, e.g. 410b256^, the
#      commit before logging, built in a worktree: its vmio is counted
#      too, logging off, driven by this build's vmio-net-drive),
#      FRAMES (default 4096), SIZES (frame bytes, default "64 1024"),
#      MODES (default "tx rx"), RING (split or packed, default split),
#      BATCH (frames per batch, default 32).
# For each case, vmio runs under callgrind twice (--poll-us 0, one
# worker), with FRAMES and 2*FRAMES frames from tools/vmio-net-drive
# (the in-tree front end as the guest, in lock-step batches); the
# difference over the extra frames leaves out start-up, set-up and
# shutdown. tx: the guest sends, vmio drops (--null); rx: vmio fills every
# buffer the guest posts (--null-source SIZE). "on": the guest turns
# logging on as QEMU does before the first frame, and a run in which vmio
# marked no page of the log fails (vmio-net-drive counts the bits).
# Prints one line a case, then a table: instructions/frame base, off, on,
# and the ratios off/base and on/off.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench-procs.sh
. "$top/scripts/bench-procs.sh"
command -v valgrind >/dev/null ||
	{ echo "callgrind-net: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }
build=$(cd "${1:-$top/build}" && pwd)
base=${BASE:-}
frames=${FRAMES:-4096}
ring=${RING:-split}
batch=${BATCH:-32}
for f in "$build/vmio" "$build/vmio-net-drive" ${base:+"$base/vmio"}; do
	[ -x "$f" ] || { echo "callgrind-net: $f is missing (build it first)" >&2; exit 1; }
done
case $ring in
split) ringopt=() ;;
packed) ringopt=(--packed) ;;
*) echo "callgrind-net: RING is split or packed, not '$ring'" >&2; exit 2 ;;
esac
dir=$(mktemp -d /tmp/vmio-cgnet.XXXXXX)
pid=
trap 'stop_procs $pid; rm -rf "$dir"' EXIT

# The instructions of one run of vmio (the binary) that carries n frames
# of size bytes in mode (tx, rx), logging on or off; the driver's line is
# appended to $dir/drive.log. Called in a command substitution, it stops
# its own vmio on every way out (the EXIT trap is the caller's).
instructions() { # vmio, mode, size, frames, log (on|off)
	local vmio=$1 mode=$2 size=$3 n=$4 log=$5 out=$dir/cg.out src=() logopt=()
	rm -f "$dir/v.sock" "$out"
	[ "$mode" = rx ] && src=(--null-source "$size")
	[ "$log" = on ] && logopt=(--log)
	valgrind --tool=callgrind --callgrind-out-file="$out" \
		"$vmio" net --null "${src[@]}" --poll-us 0 --threads 1 \
		--socket "$dir/v.sock" -q 2>"$dir/valgrind.log" &
	pid=$!
	wait_sockets "$pid" "$dir/v.sock" ||
		{ echo "callgrind-net: vmio did not start: $(tail -n 3 "$dir/valgrind.log")" >&2
		  stop_procs "$pid"; exit 1; }
	if ! "$build/vmio-net-drive" --socket "$dir/v.sock" --mode "$mode" \
		--size "$size" --frames "$n" --batch "$batch" "${ringopt[@]}" \
		"${logopt[@]}" >>"$dir/drive.log" 2>"$dir/drive.err"; then
		echo "callgrind-net: FAILED: $vmio $mode size=$size log=$log: $(cat "$dir/drive.err")" >&2
		stop_procs "$pid"
		exit 1
	fi
	stop_procs "$pid"
	pid=
	sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$out"
}

# Instructions per frame of one case, from a run of FRAMES and one of
# 2*FRAMES.
per_frame() { # vmio, mode, size, log
	local one two
	# A failed run ends the script: errexit does not reach into a
	# command substitution by itself.
	one=$(instructions "$1" "$2" "$3" "$frames" "$4") || exit 1
	two=$(instructions "$1" "$2" "$3" $((2 * frames)) "$4") || exit 1
	echo $(((two - one) / frames))
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.3f", a / b}'; }

declare -A ipf
rows=()
for mode in ${MODES:-tx rx}; do
	for size in ${SIZES:-64 1024}; do
		rows+=("$mode $size")
		cases=(off on)
		[ -n "$base" ] && cases=(base off on)
		for c in "${cases[@]}"; do
			if [ "$c" = base ]; then
				v=$(per_frame "$base/vmio" "$mode" "$size" off) || exit 1
			else
				v=$(per_frame "$build/vmio" "$mode" "$size" "$c") || exit 1
			fi
			ipf[$mode $size|$c]=$v
			marks=
			[ "$c" = on ] && marks=" ($(tail -n 1 "$dir/drive.log" | sed -n 's/.*\(pages_marked=[0-9]*\).*/\1/p') in the run of $((2 * frames)))"
			echo "$c ${mode}only size=$size ring=$ring batch=$batch instructions/frame=$v$marks"
		done
	done
done

echo
echo "vmio net --null, instructions per frame (callgrind; ring=$ring, batches of $batch, --poll-us 0)"
echo "base: ${base:-(not given: BASE=DIR)}; off, on: $build"
printf '%-14s %10s %10s %10s %9s %9s\n' case base off on off/base on/off
for r in "${rows[@]}"; do
	read -r mode size <<<"$r"
	b=${ipf[$r|base]:--}
	printf '%-14s %10s %10s %10s %9s %9s\n' "${mode}only $size" "$b" \
		"${ipf[$r|off]}" "${ipf[$r|on]}" "$(ratio "${ipf[$r|off]}" "$b")" \
		"$(ratio "${ipf[$r|on]}" "${ipf[$r|off]}")"
done
