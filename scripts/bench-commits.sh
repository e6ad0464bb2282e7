#!/bin/bash
# Whether a change made vsock slower: builds two commits (each with its
# own front end, vmio-vsock-bench) in worktrees of their own and
# runs the same vsock rows through each, interleaved (A B A B ...), with
# the direct AF_UNIX anchor in the same rounds. Prints MB/s medians, B/A
# pair by pair, and each vmio's CPU seconds per GiB.
#   scripts/bench-commits.sh A B            (e.g. bf24d82 HEAD)
#   RUNS=7 ROWS="g2h:4096:1 h2g:64:1" scripts/bench-commits.sh A B
# A row is direction:message size:connections.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
if [ $# -ne 2 ]; then
	echo "usage: scripts/bench-commits.sh REV_A REV_B" >&2
	exit 2
fi
runs=${RUNS:-5}
rows=${ROWS:-g2h:65536:1 h2g:65536:1 g2h:4096:1 h2g:4096:1 g2h:64:1 h2g:64:1}
declare -A vbytes=([65536]=1G [4096]=512M [64]=24M)
dir=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	for s in a b; do
		git worktree remove --force "$dir/$s" 2>/dev/null || true
	done
	rm -rf "$dir"
}
trap cleanup EXIT
# shellcheck source=bench-stats.sh
. "$(dirname "$0")/bench-stats.sh"

declare -A vpid
for s in a b; do
	rev=$1
	[ "$s" = b ] && rev=$2
	git worktree add --detach "$dir/$s" "$rev" >/dev/null 2>&1
	meson setup "$dir/$s/build" "$dir/$s" -Dguest_tests=false >/dev/null
	ninja -C "$dir/$s/build" vmio vmio-vsock-bench >/dev/null
	"$dir/$s/build/vmio" vsock --guest-cid 3 --socket "$dir/$s.sock" \
		--uds-path "$dir/$s.vsock" -q &
	vpid[$s]=$!
	pids+=("$!")
	for _ in $(seq 200); do
		[ -S "$dir/$s.sock" ] && break
		sleep 0.05
	done
done
bench_of() { echo "$dir/$1/build/vmio-vsock-bench"; }

echo "vsock, $1 (A) against $2 (B), $runs interleaved rounds: MB/s, vmio CPU s/GiB"
printf '%-16s %9s %9s %7s %9s %7s %7s  %s\n' row direct A "s/GiB" B "s/GiB" B/A "pair by pair"
for row in $rows; do
	IFS=: read -r d msg c <<<"$row"
	args=(--direction "$d" --msg-size "$msg" --conns "$c" --bytes "${vbytes[$msg]:-256M}")
	declare -A got=() cpu=()
	ratios=
	for _ in $(seq "$runs"); do
		line=$("$(bench_of a)" --direct "${args[@]}")
		got[direct]+="$(sed -n 's/.*MB\/s=\([0-9.]*\).*/\1/p' <<<"$line") "
		for s in a b; do
			c0=$(cpu_ticks "${vpid[$s]}")
			line=$("$(bench_of $s)" --socket "$dir/$s.sock" --uds-path "$dir/$s.vsock" "${args[@]}")
			c1=$(cpu_ticks "${vpid[$s]}")
			got[$s]+="$(sed -n 's/.*MB\/s=\([0-9.]*\).*/\1/p' <<<"$line") "
			cpu[$s]+="$(s_per_gib "$c0" "$c1" "$(sed -n 's/.* bytes=\([0-9]*\).*/\1/p' <<<"$line")") "
		done
		ratios+="$(ratio "$(awk '{print $NF}' <<<"${got[b]}")" "$(awk '{print $NF}' <<<"${got[a]}")") "
	done
	printf '%-16s %9s %9s %7s %9s %7s %7s  %s\n' "$d $msg x$c" \
		"$(list_median "${got[direct]}")" "$(list_median "${got[a]}")" \
		"$(list_median "${cpu[a]}")" "$(list_median "${got[b]}")" \
		"$(list_median "${cpu[b]}")" "$(list_median "$ratios")" "$ratios"
done
