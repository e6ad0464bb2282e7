#!/bin/bash
# `vmio net --null` against testpmd's own vhost-user backend (net_vhost),
# both driven by testpmd's virtio-user port in txonly mode, in pairs
# (vmio, net_vhost, vmio, ...) at each frame size: Mpps and the ratio pair
# by pair. make bench runs it as its "net" section (rxonly needs a
# backend that sends, so it is not measured yet). Rates swing between about 2
# and 20 Mpps on this shared 2-core machine: compare figures of one run.
# Then, as root, `vmio net --xdp` (AF_XDP, copy mode) on one end of a veth
# pair in a network namespace of the script's own: txonly counts the
# frames that arrive on the other end, rxonly the frames testpmd receives
# from a second testpmd sending into the other end (net_af_packet); sizes
# interleaved run by run, medians, with what was offered (testpmd's Tx
# rate; the generator's): the rxonly generator shares CPU 1 with testpmd
# and bounds that row. XDP=0 skips these rows, NULL_ROWS=0 the others.
#   RUNS=5 SIZES="64 512 1024" SECONDS_PER_RUN=9 scripts/bench-net.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
runs=${RUNS:-5}
sizes=${SIZES:-64 512 1024}
secs=${SECONDS_PER_RUN:-9}
# testpmd's first two per-second reports are start-up; the rate is the
# mean of those after, so a shorter run measures nothing.
if ((secs < 6)); then
	echo "bench-net: SECONDS_PER_RUN=$secs is too short to measure (6 or more)" >&2
	exit 2
fi
xdp=${XDP:-1}
dir=$(mktemp -d)
bpid=
gpid=
ns=vmio-bench-$$
cleanup() {
	for p in $gpid $bpid; do
		kill -INT "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	ip netns del "$ns" 2>/dev/null || true
	rm -rf "$dir" /var/run/dpdk/vmio-bench-$$-*
}
trap cleanup EXIT

median() {
	sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'
}

# testpmd's mean per-second Tx-pps or Rx-pps in Mpps, after the first two.
mean_pps() { # Tx|Rx, log
	grep -o "$1-pps: *[0-9]*" "$2" | awk '{print $2}' |
		tail -n +3 | awk '{t += $1; n++} END {if (n) printf "%.2f\n", t / n / 1e6; else print "-"}'
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
	mean_pps Tx "$dir/front.log"
}

[ "${NULL_ROWS:-1}" = 1 ] && printf '%-6s %12s %12s %8s  %s\n' size "vmio Mpps" "vhost Mpps" ratio "ratios pair by pair"
for size in $sizes; do
	[ "${NULL_ROWS:-1}" = 1 ] || break
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

[ "$xdp" = 1 ] || exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "bench-net: the AF_XDP rows need root (a namespace and a veth pair); XDP=0 skips them" >&2
	exit 1
fi
ip netns add "$ns"
ip -n "$ns" link add xa type veth peer name xb
ip -n "$ns" link set xa up
ip -n "$ns" link set xb up
xbstat() { ip netns exec "$ns" cat "/sys/class/net/xb/statistics/$1"; }
rate() { awk -v a="$1" -v b="$2" -v s="$3" 'BEGIN {printf "%.2f\n", (b - a) / s / 1e6}'; }

# One AF_XDP run: vmio on CPU 0, testpmd (and the rxonly generator) on
# CPU 1. Prints two Mpps: delivered and offered. txonly: frames counted
# on xb over the run after its first two seconds, and testpmd's mean
# Tx-pps (what vmio took from the guest); rxonly: testpmd's mean Rx-pps,
# and the generator's rate out of xb.
xdp_one() { # txonly|rxonly, frame size, run number
	local sock=$dir/xdp-$1-$2-$3.sock a b stat=rx_packets
	ip netns exec "$ns" taskset -c 0 "$build/vmio" net --xdp xa -q \
		--socket "$sock" &
	bpid=$!
	for _ in $(seq 200); do
		[ -S "$sock" ] && break
		sleep 0.05
	done
	if [ "$1" = rxonly ]; then
		stat=tx_packets
		timeout -s INT $((secs + 5)) ip netns exec "$ns" dpdk-testpmd \
			"${eal[@]}" --file-prefix=vmio-bench-$$-g$3 \
			--lcores '0@1,1@1' --vdev "net_af_packet0,iface=xb" -- \
			--forward-mode=txonly --txpkts="$2" \
			--stats-period 1 --total-num-mbufs 4096 >"$dir/gen.log" \
			2>&1 </dev/null &
		gpid=$!
	fi
	timeout -s INT "$secs" dpdk-testpmd "${eal[@]}" --single-file-segments \
		--file-prefix=vmio-bench-$$-f$3 --lcores '0@1,1@1' \
		--vdev "net_virtio_user0,path=$sock,queues=1" -- \
		--forward-mode="$1" --txpkts="$2" --stats-period 1 \
		--total-num-mbufs 4096 >"$dir/front.log" 2>&1 </dev/null &
	local fpid=$!
	# The measuring window: seconds 2 to secs - 1 of testpmd's run.
	sleep 2
	a=$(xbstat $stat)
	sleep $((secs - 3))
	b=$(xbstat $stat)
	wait "$fpid" || true
	for p in $gpid $bpid; do
		kill -INT "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	gpid= bpid=
	if [ "$1" = txonly ]; then
		echo "$(rate "$a" "$b" $((secs - 3))) $(mean_pps Tx "$dir/front.log")"
	else
		echo "$(mean_pps Rx "$dir/front.log") $(rate "$a" "$b" $((secs - 3)))"
	fi
}

declare -A got offered
for i in $(seq "$runs"); do
	for size in $sizes; do
		for mode in txonly rxonly; do
			read -r g o < <(xdp_one "$mode" "$size" "$i")
			got[$mode-$size]+="$g " offered[$mode-$size]+="$o "
		done
	done
done
echo
printf '%-6s %-8s %14s %14s  %s\n' size mode "xdp copy Mpps" "offered Mpps" "runs (delivered)"
for size in $sizes; do
	for mode in txonly rxonly; do
		printf '%-6s %-8s %14s %14s  %s\n' "$size" "$mode" \
			"$(printf '%s\n' ${got[$mode-$size]} | grep -vx -- - | median)" \
			"$(printf '%s\n' ${offered[$mode-$size]} | grep -vx -- - | median)" \
			"${got[$mode-$size]}"
	done
done
