#!/bin/bash
# testpmd's virtio-user port as the guest, on CPU 1; the backend on CPU 0.
# Two tables, each run in pairs (A, B, A, B, ...) at each frame size,
# txonly and rxonly: Mpps as medians, and the ratio B/A pair by pair (and
# its median).
# 1. testpmd's own vhost-user backend, net_vhost (A), against `vmio net
#    --null` (B), vmio's CPU per frame beside. txonly: the backend drops
#    what the guest sends; rxonly: it sends as fast as the guest posts
#    buffers (net_vhost's testpmd in txonly; vmio --null-source SIZE).
#    NULL_RINGS="split packed" (default split) says on which rings.
# 2. As root, `vmio net --xdp` on one end of a veth pair in a network
#    namespace of the script's own, copy mode (--xdp-copy, A) against the
#    default no-copy mode (B): txonly counts the frames that arrive on the
#    other end, rxonly the frames testpmd receives from a second testpmd
#    sending into the other end (net_af_packet, sharing CPU 1: it bounds
#    that row). Each row also shows what was offered (testpmd's Tx rate;
#    the generator's), and vmio's CPU time per frame delivered: what the
#    no-copy path saves is vmio's work, whatever the rate.
# 3. `vmio net --null --queues 2` with testpmd on both pairs (one
#    forwarding lcore, on CPU 1): --threads 1 (A) against --threads 2 (B),
#    vmio unpinned, its CPU time per frame beside each rate. The front end
#    shares the machine's two cores with vmio's two workers, which bounds
#    what a second worker can add here. THREADS_ROWS=0 skips it.
# 4. `vmio net --null` with testpmd on a split ring (A) against a packed
#    ring (B, packed_vq=1), vmio's CPU per frame beside. PACKED_ROWS=0
#    skips it.
# 5. `vmio net --null` with testpmd declining VIRTIO_F_IN_ORDER
#    (in_order=0, A) against taking it (its default, B), on a split ring
#    and on a packed one, vmio's CPU per frame beside. IN_ORDER_ROWS=0
#    skips it.
# 6. BASE=DIR, a build directory of another commit: its `vmio net --null`
#    (A) against this build's (B), on a split ring and on a packed one,
#    vmio pinned, its CPU per frame beside: whether a change made the data
#    path slower. BASE_ONLY=1 runs this table alone.
# Rates swing between about 2 and 20 Mpps on this shared 2-core machine:
# compare figures of one run. XDP=0 skips table 2, NULL_ROWS=0 table 1;
# NET_OPTS adds options to vmio in table 1 (NET_OPTS="--poll-us 0" turns
# off the default polling).
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

# shellcheck source=bench-stats.sh
. "$(dirname "$0")/bench-stats.sh"

# testpmd's mean per-second Tx-pps or Rx-pps in Mpps, after the first two.
mean_pps() { # Tx|Rx, log
	grep -o "$1-pps: *[0-9]*" "$2" | awk '{print $2}' |
		tail -n +3 | awk '{t += $1; n++} END {if (n) printf "%.2f\n", t / n / 1e6; else print "-"}'
}

wait_socket() {
	for _ in $(seq 200); do
		[ -S "$1" ] && break
		sleep 0.05
	done
}

# Stops the backend and the generator of a run.
stop_run() {
	for p in $gpid $bpid; do
		kill -INT "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	gpid= bpid=
}

eal=(--no-pci --no-huge -m 256)
# testpmd's virtio-user port on sock, in the background, for secs; with
# more than one queue pair virtio-user answers the control queue itself.
# Layout: split or packed, with -unordered for in_order=0.
front() { # sock, txonly|rxonly, frame size, run number[, queue pairs[, layout]]
	local q=${5:-1} cq=
	((q > 1)) && cq=,cq=1
	[[ ${6:-} == packed* ]] && cq+=,packed_vq=1
	[[ ${6:-} == *-unordered ]] && cq+=,in_order=0
	timeout -s INT "$secs" dpdk-testpmd "${eal[@]}" --single-file-segments \
		--file-prefix=vmio-bench-$$-f$4 --lcores '0@1,1@1' \
		--vdev "net_virtio_user0,path=$1,queues=$q$cq" -- \
		--forward-mode="$2" --txpkts="$3" --stats-period 1 \
		--rxq="$q" --txq="$q" \
		--total-num-mbufs 4096 >"$dir/front.log" 2>&1 </dev/null &
}

# Runs pairs, A then B, for every run, size and mode (in that nesting, so
# that a pair's two runs are next to each other and what else the machine
# does weighs on both alike); fn MODE A|B SIZE RUN prints "delivered
# [offered]" in Mpps. Fills, per "mode-size", space-separated lists of
# each side's figures and of the ratio B/A of each pair.
declare -A a_got b_got a_off b_off a_cpu b_cpu pair_ratio
run_pairs() { # fn A B
	local fn=$1 va=$2 vb=$3 i size mode g1 o1 c1 g2 o2 c2
	for i in $(seq "$runs"); do
		for size in $sizes; do
			for mode in txonly rxonly; do
				read -r g1 o1 c1 < <("$fn" "$mode" "$va" "$size" "$i")
				read -r g2 o2 c2 < <("$fn" "$mode" "$vb" "$size" "$i")
				a_got[$mode-$size]+="${g1:--} " a_off[$mode-$size]+="${o1:--} "
				b_got[$mode-$size]+="${g2:--} " b_off[$mode-$size]+="${o2:--} "
				a_cpu[$mode-$size]+="${c1:--} " b_cpu[$mode-$size]+="${c2:--} "
				pair_ratio[$mode-$size]+="$(ratio "$g2" "$g1") "
			done
		done
	done
}

# vmio's CPU time per frame in ns: ticks a to b over Mpps for s seconds.
ns_per_frame() { # ticks a, ticks b, Mpps, seconds
	awk -v a="$1" -v b="$2" -v m="$3" -v s="$4" -v hz="$(getconf CLK_TCK)" \
		'BEGIN {if (a == "-" || b == "-" || m == "-" || m == 0) print "-"; else printf "%.0f\n", (b - a) / hz * 1e3 / (m * s)}'
}

# testpmd's mean rate over the run just ended: Tx-pps in txonly, Rx-pps
# in rxonly, in Mpps.
front_mpps() { # txonly|rxonly
	if [ "$1" = txonly ]; then
		mean_pps Tx "$dir/front.log"
	else
		mean_pps Rx "$dir/front.log"
	fi
}

# One run of `vmio net --null` and testpmd on its socket. Prints
# testpmd's mean Tx-pps or Rx-pps, "-" for offered, and vmio's CPU time
# per frame in ns over the run.
null_run() { # txonly|rxonly, frame size, run number, queue pairs, split|packed, pin|free, vmio options...
	local mode=$1 size=$2 run=$3 q=$4 layout=$5 pin=() sock t0 t1 mpps src=()
	[ "$6" = pin ] && pin=(taskset -c 0)
	shift 6
	sock=$dir/run-$q-$layout-$mode-$size-$run-$RANDOM.sock
	[ "$mode" = rxonly ] && src=(--null-source "$size")
	"${pin[@]}" "${vmio_bin:-$build/vmio}" net --null "${src[@]}" --queues "$q" "$@" -q \
		--socket "$sock" &
	bpid=$!
	wait_socket "$sock"
	t0=$(cpu_ticks "$bpid")
	front "$sock" "$mode" "$size" "$run" "$q" "$layout"
	wait $! || true
	t1=$(cpu_ticks "$bpid")
	stop_run
	mpps=$(front_mpps "$mode")
	echo "$mpps - $(ns_per_frame "$t0" "$t1" "$mpps" "$secs")"
}

# One run with the null backend on CPU 0 and testpmd on a LAYOUT ring:
# vmio (null_run), or net_vhost. Prints what null_run prints; net_vhost's
# CPU per frame is "-" (it polls a whole core whatever the rate).
null_one() { # txonly|rxonly, vmio-LAYOUT|vhost-LAYOUT, frame size, run number
	local sock=$dir/$2-$1-$3-$4.sock layout=${2#*-} fwd=(--forward-mode=rxonly)

	if [[ $2 == vmio-* ]]; then
		# shellcheck disable=SC2086 # NET_OPTS: options, split
		null_run "$1" "$3" "$4" 1 "$layout" pin ${NET_OPTS:-}
		return
	fi
	# net_vhost does the opposite of the guest: rxonly drops what
	# txonly sends; txonly fills every buffer rxonly posts.
	[ "$1" = rxonly ] && fwd=(--forward-mode=txonly --txpkts="$3")
	timeout -s INT $((secs + 10)) dpdk-testpmd "${eal[@]}" \
		--file-prefix=vmio-bench-$$-b$4 --lcores '0@0,1@0' \
		--vdev "net_vhost0,iface=$sock,queues=1" -- \
		"${fwd[@]}" --stats-period 1 \
		--total-num-mbufs 4096 >"$dir/backend.log" 2>&1 </dev/null &
	bpid=$!
	wait_socket "$sock"
	front "$sock" "$1" "$3" "$4" 1 "$layout"
	wait $! || true
	stop_run
	echo "$(front_mpps "$1") - -"
}

# run_pairs' table, then a clean slate: A's and B's medians (with offered,
# each followed by its offered median and vmio's CPU time per frame), the
# median of the ratios B/A and the ratios pair by pair.
print_pairs() { # A label, B label, offered (0|1)
	local size mode k
	if [ "$3" = 1 ]; then
		printf '%-6s %-7s %9s %9s %7s %9s %9s %7s %13s  %s\n' size mode "$1" offered "ns/f" "$2" offered "ns/f" "$2/$1" "pair by pair"
	else
		printf '%-6s %-7s %9s %9s %10s  %s\n' size mode "$1" "$2" "$2/$1" "pair by pair"
	fi
	for mode in txonly rxonly; do
		for size in $sizes; do
			k=$mode-$size
			if [ "$3" = 1 ]; then
				printf '%-6s %-7s %9s %9s %7s %9s %9s %7s %13s  %s\n' "$size" "$mode" \
					"$(list_median "${a_got[$k]}")" "$(list_median "${a_off[$k]}")" \
					"$(list_median "${a_cpu[$k]}")" \
					"$(list_median "${b_got[$k]}")" "$(list_median "${b_off[$k]}")" \
					"$(list_median "${b_cpu[$k]}")" \
					"$(list_median "${pair_ratio[$k]}")" "${pair_ratio[$k]}"
			else
				printf '%-6s %-7s %9s %9s %10s  %s\n' "$size" "$mode" \
					"$(list_median "${a_got[$k]}")" "$(list_median "${b_got[$k]}")" \
					"$(list_median "${pair_ratio[$k]}")" "${pair_ratio[$k]}"
			fi
		done
	done
	a_got=() b_got=() a_off=() b_off=() a_cpu=() b_cpu=() pair_ratio=()
}

if [ "${NULL_ROWS:-1}" = 1 ] && [ "${BASE_ONLY:-0}" != 1 ]; then
	for layout in ${NULL_RINGS:-split}; do
		run_pairs null_one "vhost-$layout" "vmio-$layout"
		echo "vmio net --null against net_vhost on a $layout ring, Mpps and vmio ns of CPU per frame, $runs pairs (vhost, vmio) of $secs s"
		print_pairs vhost vmio 1
	done
fi

# Two queue pairs, --threads N, vmio unpinned.
threads_one() { # txonly|rxonly, threads, frame size, run number
	null_run "$1" "$3" "$4" 2 split free --threads "$2"
}

# One pair, vmio on CPU 0, testpmd on a split or a packed ring.
layout_one() { # txonly|rxonly, split|packed, frame size, run number
	null_run "$1" "$3" "$4" 1 "$2" pin
}

# One pair on a layout, vmio of BASE or of this build.
base_one() { # txonly|rxonly, base-LAYOUT|this-LAYOUT, frame size, run number
	local vmio_bin=$build/vmio
	[[ $2 == base-* ]] && vmio_bin=$BASE/vmio
	vmio_bin=$vmio_bin null_run "$1" "$3" "$4" 1 "${2#*-}" pin
}

if [ -n "${BASE:-}" ]; then
	[ -x "$BASE/vmio" ] || { echo "bench-net: BASE=$BASE holds no vmio" >&2; exit 2; }
	for layout in split packed; do
		run_pairs base_one "base-$layout" "this-$layout"
		echo "vmio net --null on a $layout ring: $BASE (base) against $build (this), Mpps and vmio ns of CPU per frame, $runs pairs of $secs s"
		print_pairs base this 1
	done
	[ "${BASE_ONLY:-0}" = 1 ] && exit 0
fi

if [ "${PACKED_ROWS:-1}" = 1 ]; then
	run_pairs layout_one split packed
	echo "vmio net --null: testpmd on a split ring against a packed one (packed_vq=1), Mpps and vmio ns of CPU per frame, $runs pairs of $secs s"
	print_pairs split packed 1
fi

if [ "${IN_ORDER_ROWS:-1}" = 1 ]; then
	for layout in split packed; do
		run_pairs layout_one "$layout-unordered" "$layout"
		echo "vmio net --null, testpmd on a $layout ring: in_order=0 against in_order=1 (VIRTIO_F_IN_ORDER), Mpps and vmio ns of CPU per frame, $runs pairs of $secs s"
		print_pairs unordered in-order 1
	done
fi

if [ "${THREADS_ROWS:-1}" = 1 ]; then
	run_pairs threads_one 1 2
	echo "vmio net --null --queues 2: --threads 1 against --threads 2, Mpps and vmio ns of CPU per frame, $runs pairs of $secs s"
	print_pairs threads1 threads2 1
fi

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
# CPU 1. Prints two Mpps: delivered and offered, and vmio's CPU time per
# frame delivered (ns, over the same window). txonly: frames counted
# on xb over the run after its first two seconds, and testpmd's mean
# Tx-pps (what vmio took from the guest); rxonly: testpmd's mean Rx-pps,
# and the generator's rate out of xb.
xdp_one() { # txonly|rxonly, copy|nocopy, frame size, run number
	local sock=$dir/xdp-$1-$2-$3-$4.sock a b ca cb got stat=rx_packets copy=()
	[ "$2" = copy ] && copy=(--xdp-copy)
	ip netns exec "$ns" taskset -c 0 "$build/vmio" net --xdp xa \
		"${copy[@]}" -q --socket "$sock" &
	bpid=$!
	wait_socket "$sock"
	if [ "$1" = rxonly ]; then
		stat=tx_packets
		timeout -s INT $((secs + 5)) ip netns exec "$ns" dpdk-testpmd \
			"${eal[@]}" --file-prefix=vmio-bench-$$-g$4 \
			--lcores '0@1,1@1' --vdev "net_af_packet0,iface=xb" -- \
			--forward-mode=txonly --txpkts="$3" \
			--stats-period 1 --total-num-mbufs 4096 >"$dir/gen.log" \
			2>&1 </dev/null &
		gpid=$!
	fi
	front "$sock" "$1" "$3" "$4"
	local fpid=$!
	# The measuring window: seconds 2 to secs - 1 of testpmd's run.
	sleep 2
	a=$(xbstat $stat) ca=$(cpu_ticks "$bpid")
	sleep $((secs - 3))
	b=$(xbstat $stat) cb=$(cpu_ticks "$bpid")
	wait "$fpid" || true
	stop_run
	if [ "$1" = txonly ]; then
		got=$(rate "$a" "$b" $((secs - 3)))
		echo "$got $(mean_pps Tx "$dir/front.log") $(ns_per_frame "$ca" "$cb" "$got" $((secs - 3)))"
	else
		got=$(mean_pps Rx "$dir/front.log")
		echo "$got $(rate "$a" "$b" $((secs - 3))) $(ns_per_frame "$ca" "$cb" "$got" $((secs - 3)))"
	fi
}

[ "${NULL_ROWS:-1}" = 1 ] && echo
run_pairs xdp_one copy nocopy
echo "vmio net --xdp on a veth, Mpps delivered and offered, vmio's CPU ns per frame, $runs pairs (copy, no-copy) of $secs s"
print_pairs copy no-copy 1
