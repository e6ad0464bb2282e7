#!/bin/bash
# `vmio net --null` against testpmd's own vhost-user backend (net_vhost),
# both driven by testpmd's virtio-user port in txonly mode, in pairs
# (vmio, net_vhost, vmio, ...) at each frame size: Mpps and the ratio pair
# by pair. make bench runs it as its "net" section (rxonly needs a
# backend that sends, so it is not measured yet). Rates swing between about 2
# and 20 Mpps on this shared 2-core machine: compare figures of one run.
#   RUNS=5 SIZES="64 512 1024" SECONDS_PER_RUN=9 scripts/bench-net.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
runs=${RUNS:-5}
sizes=${SIZES:-64 512 1024}
secs=${SECONDS_PER_RUN:-9}
dir=$(mktemp -d)
bpid=
cleanup() {
	if [ -n "$bpid" ]; then
		kill -INT "$bpid" 2>/dev/null || true
		wait "$bpid" 2>/dev/null || true
	fi
	rm -rf "$dir" /var/run/dpdk/vmio-bench-$$-*
}
trap cleanup EXIT

median() {
	sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'
}

eal=(--no-pci --no-huge -m 256)
# One run: the backend on CPU 0, testpmd's virtio-user lcores on CPU 1.
# Prints the mean of testpmd's per-second Tx-pps after the first two.
one() { # vmio|vhost, frame size, run number
	local sock=$dir/$1-$2-$3.sock
	if [ "$1" = vmio ]; then
		taskset -c 0 "$build/vmio" net --null -q --socket "$sock" &
	else
		timeout -s INT $((secs + 10)) dpdk-testpmd "${eal[@]}" \
			--file-prefix=vmio-bench-$$-b$3 --lcores '0@0,1@0' \
			--vdev "net_vhost0,iface=$sock,queues=1" -- \
			--forward-mode=rxonly --stats-period 1 \
			--total-num-mbufs 4096 >"$dir/backend.log" 2>&1 </dev/null &
	fi
	bpid=$!
	for _ in $(seq 200); do
		[ -S "$sock" ] && break
		sleep 0.05
	done
	timeout -s INT "$secs" dpdk-testpmd "${eal[@]}" --single-file-segments \
		--file-prefix=vmio-bench-$$-f$3 --lcores '0@1,1@1' \
		--vdev "net_virtio_user0,path=$sock,queues=1" -- \
		--forward-mode=txonly --txpkts="$2" --stats-period 1 \
		--total-num-mbufs 4096 >"$dir/front.log" 2>&1 </dev/null || true
	kill -INT "$bpid" 2>/dev/null || true
	wait "$bpid" 2>/dev/null || true
	bpid=
	grep -o 'Tx-pps: *[0-9]*' "$dir/front.log" | awk '{print $2}' |
		tail -n +3 | awk '{t += $1; n++} END {if (n) printf "%.2f\n", t / n / 1e6; else print "-"}'
}

printf '%-6s %12s %12s %8s  %s\n' size "vmio Mpps" "vhost Mpps" ratio "ratios pair by pair"
for size in $sizes; do
	v=() h=() r=()
	for i in $(seq "$runs"); do
		a=$(one vmio "$size" "$i")
		b=$(one vhost "$size" "$i")
		v+=("$a") h+=("$b")
		r+=("$(awk -v a="$a" -v b="$b" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b}')")
	done
	printf '%-6s %12s %12s %8s  %s\n' "$size" \
		"$(printf '%s\n' "${v[@]}" | grep -vx -- - | median)" \
		"$(printf '%s\n' "${h[@]}" | grep -vx -- - | median)" \
		"$(printf '%s\n' "${r[@]}" | grep -vx -- - | median)" "${r[*]}"
done
