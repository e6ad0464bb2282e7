#!/bin/bash
# Instructions vmio vsock executes per packet, counted by callgrind: a
# figure that does not move with the machine's load, for comparing two
# builds of the data path (a refactor must not add work per packet).
#
# usage: scripts/callgrind-vsock.sh [BUILD_DIR...]   (default: build)
# Env: MSG (bytes a write, default 4096), BYTES (default 32M),
#      DIRS (default "g2h h2g"), BENCH_ARGS (more vmio-vsock-bench
#      options, e.g. "--tx-piece 32K": the guest's chains cut as Linux
#      6.17 cuts them).
# For each build and direction, vmio vsock runs under callgrind twice,
# with one stream of BYTES and of 2*BYTES from vmio-vsock-bench (the
# in-tree driver as the guest); the difference over the extra packets
# (BYTES/MSG) leaves out start-up and shutdown. Prints one line a build
# and direction: build dir msg=N instructions/packet=N.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench-procs.sh
. "$top/scripts/bench-procs.sh"
command -v valgrind >/dev/null ||
	{ echo "callgrind-vsock: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }
msg=${MSG:-4096}
bytes=$(numfmt --from=iec "${BYTES:-32M}")
builds=("$@")
((${#builds[@]})) || builds=("$top/build")
dir=$(mktemp -d /tmp/vmio-cg.XXXXXX)
trap 'rm -rf "$dir"' EXIT

# The instructions of one vmio vsock run that carries n bytes in direction d.
instructions() { # build, direction, bytes
	local b=$1 d=$2 n=$3 pid out=$dir/cg.out
	rm -f "$dir"/*.sock "$dir"/*.vsock* "$out"
	valgrind --tool=callgrind --callgrind-out-file="$out" \
		"$b/vmio" vsock --guest-cid 3 --socket "$dir/v.sock" \
		--uds-path "$dir/v.vsock" -q 2>"$dir/valgrind.log" &
	pid=$!
	wait_sockets "$pid" "$dir/v.sock" ||
		{ echo "callgrind-vsock: vmio did not start: $(tail -n 3 "$dir/valgrind.log")" >&2; exit 1; }
	# shellcheck disable=SC2086 # BENCH_ARGS: words, as given
	"$b/vmio-vsock-bench" --socket "$dir/v.sock" --uds-path "$dir/v.vsock" \
		--direction "$d" --msg-size "$msg" --bytes "$n" ${BENCH_ARGS:-} >/dev/null
	stop_procs "$pid"
	sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$out"
}

for b in "${builds[@]}"; do
	for d in ${DIRS:-g2h h2g}; do
		one=$(instructions "$b" "$d" "$bytes")
		two=$(instructions "$b" "$d" $((2 * bytes)))
		echo "$b $d msg=$msg instructions/packet=$(((two - one) / (bytes / msg)))"
	done
done
