#!/bin/bash
# Benchmarks. Each figure is a median over interleaved runs; runs swing a
# lot on this 2-core shared machine, so compare only figures from one run
# of this script. Later issues add their anchors (socat, DPDK) here, run
# interleaved with vmio: A B A B ...
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
runs=${RUNS:-5}
bytes=${BYTES:-1G}
dir=$(mktemp -d)
pid=
vpid=
cleanup() {
	for p in $pid $vpid; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$dir"
}
trap cleanup EXIT

median() {
	sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'
}

# ---- loopback: a pattern out on tx and back on rx ----
"$build/vmio" loopback --socket-path "$dir/vhost.sock" -q &
pid=$!
results=()
for i in $(seq "$runs"); do
	line=$("$build/vmio-drive" --socket "$dir/vhost.sock" --bytes "$bytes")
	echo "loopback run $i: $line"
	results+=("$(sed -n 's/.* \([0-9.]*\) MB\/s.*/\1/p' <<<"$line")")
done
echo "loopback: median $(printf '%s\n' "${results[@]}" | median) MB/s over $runs runs of $bytes"
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
pid=

# ---- vsock: `vmio vsock` with the in-tree front end as the guest and a
# host program in another process, against the same two processes over a
# direct AF_UNIX stream (the limit this machine sets), in pairs: direct,
# vmio, direct, vmio, ... For h2g at 64 KiB a third run per round gives
# the guest 64 KiB rx buffers instead of Linux's 4 KiB. ----
"$build/vmio" vsock --guest-cid 3 --socket "$dir/vsock.sock" \
	--uds-path "$dir/vm.vsock" -q &
vpid=$!
for _ in $(seq 100); do
	[ -S "$dir/vsock.sock" ] && break
	sleep 0.05
done
vs=("$build/vmio-vsock-bench" --socket "$dir/vsock.sock" --uds-path "$dir/vm.vsock")
rows=()
declare -A res
failed=0
# Bytes per run so that each takes about 0.3-2 s.
declare -A vbytes=([65536]=${VSOCK_BYTES_64K:-2G} [4096]=${VSOCK_BYTES_4K:-512M} [64]=${VSOCK_BYTES_64:-24M})

one() { # key, command...
	local key=$1 line
	shift
	if line=$("$@" 2>&1); then
		echo "  $line"
		res[$key]+="$(sed -n 's/.*MB\/s=\([0-9.]*\).*/\1/p' <<<"$line") "
	else
		echo "  FAILED: $key: $line"
		failed=1
	fi
}

for msg in 65536 4096 64; do
	for d in g2h h2g; do
		for c in 1 4; do
			cell="$d msg=$msg conns=$c"
			rows+=("$cell")
			echo "vsock $cell, $runs rounds of ${vbytes[$msg]}:"
			args=(--direction "$d" --msg-size "$msg" --conns "$c" --bytes "${vbytes[$msg]}")
			for _ in $(seq "$runs"); do
				one "$cell|direct" "$build/vmio-vsock-bench" --direct "${args[@]}"
				one "$cell|vmio" "${vs[@]}" "${args[@]}"
				if [ "$d" = h2g ] && [ "$msg" = 65536 ]; then
					one "$cell|rx64k" "${vs[@]}" "${args[@]}" --rx-buf 64K
				fi
			done
		done
	done
done

echo
echo "vsock: medians over $runs interleaved rounds (MB/s); goal vmio/direct >= 0.8 at 64 KiB"
printf '%-26s %10s %10s %8s %14s %8s\n' case direct vmio ratio "vmio rx64k" ratio
for cell in "${rows[@]}"; do
	dm=$(tr ' ' '\n' <<<"${res[$cell|direct]:-}" | grep . | median || true)
	vm=$(tr ' ' '\n' <<<"${res[$cell|vmio]:-}" | grep . | median || true)
	xm=$(tr ' ' '\n' <<<"${res[$cell|rx64k]:-}" | grep . | median || true)
	ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b}'; }
	if [ -n "${res[$cell|rx64k]:-}" ]; then
		printf '%-26s %10s %10s %8s %14s %8s\n' "$cell" "$dm" "$vm" "$(ratio "$vm" "$dm")" "$xm" "$(ratio "$xm" "$dm")"
	else
		printf '%-26s %10s %10s %8s\n' "$cell" "$dm" "$vm" "$(ratio "$vm" "$dm")"
	fi
done
exit $failed
