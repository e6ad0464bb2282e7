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
ppid=
cpid=
# shellcheck source=bench-stats.sh
. "$(dirname "$0")/bench-stats.sh"
# shellcheck source=bench-procs.sh
. "$(dirname "$0")/bench-procs.sh"
cleanup() {
	# shellcheck disable=SC2086 # the empty ones go
	stop_procs $pid $vpid $ppid $cpid
	rm -rf "$dir"
}
trap cleanup EXIT

# SECTIONS picks what runs (default all): loopback vsock redirect net
# netlog isolation scale handover (SECTIONS=isolation make bench runs only
# that one).
sections=" ${SECTIONS:-loopback vsock redirect net netlog isolation scale handover} "
want() { [[ "$sections" == *" $1 "* ]]; }
failed=0

# ---- loopback: a pattern out on tx and back on rx ----
if want loopback; then
"$build/vmio" loopback --socket-path "$dir/vhost.sock" -q &
pid=$!
results=()
for i in $(seq "$runs"); do
	line=$("$build/vmio-drive" --socket "$dir/vhost.sock" --bytes "$bytes")
	echo "loopback run $i: $line"
	results+=("$(sed -n 's/.* \([0-9.]*\) MB\/s.*/\1/p' <<<"$line")")
done
echo "loopback: median $(printf '%s\n' "${results[@]}" | median) MB/s over $runs runs of $bytes"
stop_procs "$pid"
pid=
fi

# ---- vsock: `vmio vsock` with the in-tree front end as the guest and a
# host program in another process, against the same two processes over a
# direct AF_UNIX stream (the limit this machine sets), in pairs: direct,
# vmio, direct, vmio, ... For h2g at 64 KiB a third run per round gives
# the guest 64 KiB rx buffers instead of Linux's 4 KiB, and for h2g of
# 4 KiB and more a fourth keeps 4 KiB buffers but negotiates mergeable rx
# buffers (packets of up to 64 KiB spanning them). At 64 KiB another vmio
# with --poll-us 50 runs in the same rounds, the same vmio with the
# front end on packed rings (VMIO_RING=packed), and for g2h at 64 KiB one
# with --tx-splice (the guest's pages spliced into the host socket,
# against the default copy), and one whose guest cuts each packet as
# Linux 6.17 does (the header, then 32 KiB pieces: three descriptors),
# against the same bytes in one descriptor (the vmio column). ----
if want vsock; then
# A vmio vsock at $dir/NAME.sock and NAME.vsock, with more options; sets
# started (its pid) once it listens.
start_vsock() { # name, options...
	local name=$1
	shift
	"$build/vmio" vsock --guest-cid 3 --socket "$dir/$name.sock" \
		--uds-path "$dir/$name.vsock" -q "$@" &
	started=$!
	wait_sockets "$started" "$dir/$name.sock" || true
}
start_vsock vsock
vpid=$started
vs=("$build/vmio-vsock-bench" --socket "$dir/vsock.sock" --uds-path "$dir/vsock.vsock")
start_vsock vpoll --poll-us 50
ppid=$started
vp=("$build/vmio-vsock-bench" --socket "$dir/vpoll.sock" --uds-path "$dir/vpoll.vsock")
start_vsock vcopy --tx-splice
cpid=$started
vc=("$build/vmio-vsock-bench" --socket "$dir/vcopy.sock" --uds-path "$dir/vcopy.vsock")
rows=()
declare -A res
# VSOCK_MSGS picks the message sizes (default 65536 4096 64).
# Bytes per run so that each takes about 0.3-2 s.
declare -A vbytes=([65536]=${VSOCK_BYTES_64K:-2G} [4096]=${VSOCK_BYTES_4K:-512M} [64]=${VSOCK_BYTES_64:-24M})

declare -A cpu wake ends ewake
# The bench says how often each of its ends slept (VSOCK_BENCH_STATS).
export VSOCK_BENCH_STATS=1
# One run: its MB/s into res[key]; the CPU seconds per GiB of its two ends
# (the bench and its forked host side: user + system, from bash's time)
# into ends[key] and their wake-ups per MiB (voluntary context switches,
# as the bench counts them) into ewake[key]; and, for a vmio run, vmio's
# own CPU seconds per GiB (from /proc/PID/stat around it) into cpu[key]
# and its threads' wake-ups per MiB into wake[key].
one() { # key, command...
	local key=$1 line c0 c1 w0 w1 b t e TIMEFORMAT='%3U %3S' p=$vpid
	shift
	[[ $key == *"|poll" ]] && p=$ppid
	[[ $key == *"|copy" ]] && p=$cpid
	c0=$(cpu_ticks "$p") w0=$(wakeups "$p")
	if { time line=$("$@" 2>&1); } 2>"$dir/time"; then
		c1=$(cpu_ticks "$p") w1=$(wakeups "$p")
		e=$(sed -n 's/.*; wakeups guest \([0-9]*\) host \([0-9]*\)$/\1 + \2/p' <<<"$line")
		line=$(grep 'MB/s=' <<<"$line")
		res[$key]+="$(sed -n 's/.*MB\/s=\([0-9.]*\).*/\1/p' <<<"$line") "
		b=$(sed -n 's/.* bytes=\([0-9]*\).*/\1/p' <<<"$line")
		t=$(awk -v b="$b" '{printf "%.3f", ($1 + $2) / (b / 1073741824)}' "$dir/time")
		ends[$key]+="$t "
		line+=" ends_s/GiB=$t"
		if [ -n "$e" ]; then
			e=$(per_mib 0 $((e)) "$b" 2)
			ewake[$key]+="$e "
			line+=" ends_wakeups/MiB=$e"
		fi
		if [[ $key != *"|direct" ]]; then
			c0=$(s_per_gib "$c0" "$c1" "$b")
			w0=$(per_mib "$w0" "$w1" "$b")
			cpu[$key]+="$c0 "
			wake[$key]+="$w0 "
			line+=" vmio_s/GiB=$c0 vmio_wakeups/MiB=$w0"
		fi
		echo "  $line"
	else
		echo "  FAILED: $key: $line"
		failed=1
	fi
}

for msg in ${VSOCK_MSGS:-65536 4096 64}; do
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
				if [ "$d" = h2g ] && [ "$msg" -ge 4096 ]; then
					one "$cell|mrg" "${vs[@]}" "${args[@]}" --mergeable
				fi
				# A guest program that sets SO_VM_SOCKETS_BUFFER_SIZE
				# to 1 MiB: Linux's 256 KiB is what vmio waits on
				# host to guest (credit_stalls).
				if [ "$d" = h2g ] && [ "$msg" = 65536 ]; then
					one "$cell|buf1m" "${vs[@]}" "${args[@]}" --buffer-size 1M
				fi
				if [ "$msg" = 65536 ]; then
					one "$cell|poll" "${vp[@]}" "${args[@]}"
					one "$cell|packed" env VMIO_RING=packed "${vs[@]}" "${args[@]}"
				fi
				if [ "$d" = g2h ] && [ "$msg" = 65536 ]; then
					one "$cell|copy" "${vc[@]}" "${args[@]}"
					# Linux 6.17's layout: the payload in two
					# 32 KiB descriptors after the header's.
					one "$cell|cut32k" "${vs[@]}" "${args[@]}" --tx-piece 32K
				fi
			done
		done
	done
done

echo
echo "vsock: medians over $runs interleaved rounds (MB/s, and vmio's CPU s/GiB); goal vmio/direct >= 0.8 at 64 KiB"
printf '%-26s %9s %9s %6s %6s %11s %6s %6s %9s %6s %6s %9s %6s %6s %9s %6s %6s %9s %6s %6s %9s %6s %6s %9s %6s %6s\n' case direct vmio ratio s/GiB "vmio rx64k" ratio s/GiB "vmio mrg" ratio s/GiB "guest 1M" ratio s/GiB "poll 50us" ratio s/GiB packed ratio s/GiB "tx-splice" ratio s/GiB "tx 32K cut" ratio s/GiB
for cell in "${rows[@]}"; do
	dm=$(list_median "${res[$cell|direct]:-}")
	line=$(printf '%-26s %9s' "$cell" "$dm")
	for v in vmio rx64k mrg buf1m poll packed copy cut32k; do
		w=9
		[ "$v" = rx64k ] && w=11
		if [ -n "${res[$cell|$v]:-}" ]; then
			xm=$(list_median "${res[$cell|$v]}")
			line+=$(printf " %${w}s %6s %6s" "$xm" "$(ratio "$xm" "$dm")" "$(list_median "${cpu[$cell|$v]:-}")")
		else
			line+=$(printf " %${w}s %6s %6s" - - -)
		fi
	done
	echo "$line"
done
echo
echo "vsock: a guest that cuts each 64 KiB packet as Linux 6.17 does (header, 32 KiB, 32 KiB) against the same bytes in one descriptor, round by round (the two runs of a round are neighbours)"
for cell in "${rows[@]}"; do
	[ -n "${res[$cell|cut32k]:-}" ] || continue
	read -r -a a <<<"${res[$cell|cut32k]}"
	read -r -a b <<<"${res[$cell|vmio]}"
	pairs=()
	for i in "${!a[@]}"; do
		[ -n "${b[$i]:-}" ] && pairs+=("$(ratio "${a[$i]}" "${b[$i]}")")
	done
	echo "$cell: cut/one median $(list_median "${pairs[*]}") (rounds ${pairs[*]}); vmio s/GiB one $(list_median "${cpu[$cell|vmio]:-}"), cut $(list_median "${cpu[$cell|cut32k]:-}")"
done
echo
echo "vsock: the machine's CPU s/GiB for the whole path, medians: direct (its two ends) against vmio (the same two ends plus vmio); direct/vmio is the rate ratio the path allows where the CPU is what bounds it"
printf '%-26s %9s %9s %9s %9s %9s\n' case direct "vmio ends" vmio "all" direct/all
for cell in "${rows[@]}"; do
	de=$(list_median "${ends[$cell|direct]:-}")
	ve=$(list_median "${ends[$cell|vmio]:-}")
	vc=$(list_median "${cpu[$cell|vmio]:-}")
	all=$(awk -v a="$ve" -v b="$vc" 'BEGIN {if (a == "-" || b == "-") print "-"; else printf "%.3f", a + b}')
	printf '%-26s %9s %9s %9s %9s %9s\n' "$cell" "$de" "$ve" "$vc" "$all" "$(ratio "$de" "$all")"
done
echo
echo "vsock: wake-ups per MiB (voluntary context switches), medians: the two ends', direct and through vmio, then vmio's threads' in each column"
printf '%-26s %12s %12s %9s %11s %9s %9s %9s %9s %9s\n' case "ends direct" "ends vmio" vmio "vmio rx64k" "vmio mrg" "guest 1M" "poll 50us" packed "tx-splice"
for cell in "${rows[@]}"; do
	line=$(printf '%-26s %12s %12s' "$cell" "$(list_median "${ewake[$cell|direct]:-}")" "$(list_median "${ewake[$cell|vmio]:-}")")
	for v in vmio rx64k mrg buf1m poll packed copy; do
		w=9
		[ "$v" = rx64k ] && w=11
		line+=$(printf " %${w}s" "$(list_median "${wake[$cell|$v]:-}")")
	done
	echo "$line"
done
stop_procs "$vpid" "$ppid" "$cpid"
vpid= ppid= cpid=
unset VSOCK_BENCH_STATS
fi

# ---- redirect: `vmio redirect` against socat in the same run, each
# relaying a checked pattern from a sender into a unix stream sink
# (vmio-redirect-bench run). Shapes: udg->ust (unix datagrams in, the
# shape of the sockmap work), ust->ust and tcp->ust. Rounds interleave
# socat, vmio (default engine), then vmio with each engine forced, and
# the direct path: the sender straight into a sink on the ingress socket
# type, no relay (the limit). A relay
# that refuses its command line (exit 2 at start: an address or engine
# not supported yet) gets "n/a" for the row, not a failed bench. The
# machine's CPU counts everything that ran, the sender and sink too; each
# run first waits (up to 3 s) for other jobs to leave the machine idle. ----
if want redirect; then
rbytes=${REDIR_BYTES:-2G}
rport=${REDIR_PORT:-39123}
# Bounds a hung relay: the tool's own timeouts catch a stall, this the rest.
rlimit=${REDIR_TIMEOUT:-120}
declare -A rin=([udg]="UNIX-RECV:$dir/in" [ust]="UNIX-LISTEN:$dir/in"
	[tcp]="TCP-LISTEN:$rport,reuseaddr")
declare -A rto=([udg]="udg:$dir/in" [ust]="ust:$dir/in" [tcp]="tcp:$rport")
relays=(socat vmio "vmio copy" "vmio splice" "vmio sockmap" direct)
# Per "shape|relay": space-separated MB/s, relay and machine s/GiB, the
# ratio to socat in the same round; or why it was refused.
declare -A rmb rcpu rmcpu rother rratio refused

relay_cmd() { # shape relay: sets cmd to the relay's command line
	local in=${rin[$1]} out="UNIX-CONNECT:$dir/out"
	case $2 in
	socat) cmd=(socat -b 1048576 "$in" "$out") ;;
	vmio) cmd=("$build/vmio" redirect -q "$in" "$out") ;;
	direct) cmd=() ;;
	"vmio "*) cmd=("$build/vmio" redirect -q --engine "${2#vmio }" "$in" "$out") ;;
	esac
}

for shape in udg ust tcp; do
	echo "redirect $shape->ust, $runs rounds of $rbytes:"
	for _ in $(seq "$runs"); do
		socat_mb=
		for relay in "${relays[@]}"; do
			key="$shape|$relay"
			[ -n "${refused[$key]:-}" ] && continue
			relay_cmd "$shape" "$relay"
			rc=0
			if [ "$relay" = direct ]; then
				line=$(timeout "$rlimit" "$build/vmio-redirect-bench" run \
					--direct --to "${rto[$shape]}" \
					--bytes "$rbytes" 2>&1) || rc=$?
			else
				line=$(timeout "$rlimit" "$build/vmio-redirect-bench" run \
					--sink "$dir/out" --to "${rto[$shape]}" \
					--bytes "$rbytes" -- "${cmd[@]}" 2>&1) || rc=$?
			fi
			if [ $rc -eq 0 ]; then
				echo "  $relay: $line"
				mb=$(field MB/s "$line")
				rmb[$key]+="$mb "
				rcpu[$key]+="$(field relay_s/GiB "$line") "
				rmcpu[$key]+="$(field machine_s/GiB "$line") "
				rother[$key]+="$(field others_cpu "$line") "
				if [ "$relay" = socat ]; then
					socat_mb=$mb
				elif [ -n "$socat_mb" ]; then
					rratio[$key]+="$(ratio "$mb" "$socat_mb") "
				fi
			elif [ $rc -eq 3 ]; then
				refused[$key]=$(sed -n 's/^refused: \(vmio redirect: \)\{0,1\}//p' <<<"$line" | head -n 1)
				echo "  $relay: refused: ${refused[$key]}"
			else
				echo "  FAILED: $shape $relay: ${line:-timed out after $rlimit s}"
				[ "$relay" = socat ] && socat_mb=
				failed=1
			fi
		done
	done
done

echo
echo "redirect: medians over $runs interleaved rounds of $rbytes into a unix stream sink"
echo "(MB/s at the sink; CPU s/GiB of the relay process and of the whole machine;"
echo " direct: no relay, the sender straight into a sink on the ingress type;"
echo " others: CPU s other jobs took during a run, in machine already;"
echo " x socat: vmio MB/s over socat MB/s of the same round, median, then each round)"
printf '%-9s %-13s %8s %8s %8s %7s %8s  %s\n' shape relay MB/s relay machine others "x socat" "each round"
for shape in udg ust tcp; do
	for relay in "${relays[@]}"; do
		key="$shape|$relay"
		if [ -n "${refused[$key]:-}" ]; then
			printf '%-9s %-13s %s\n' "$shape->ust" "$relay" "n/a (refused: ${refused[$key]})"
			continue
		fi
		r=${rratio[$key]:-}
		printf '%-9s %-13s %8s %8s %8s %7s %8s  %s\n' "$shape->ust" "$relay" \
			"$(list_median "${rmb[$key]:-}")" "$(list_median "${rcpu[$key]:-}")" \
			"$(list_median "${rmcpu[$key]:-}")" "$(list_median "${rother[$key]:-}")" \
			"$(list_median "$r")" "${r:--}"
	done
done
echo "goal: vmio >= 3.5x socat on udg->ust, >= 1.0x on every shape; relay CPU < 0.05 s/GiB on sockmap"

# ---- redirect --threads: a forking UNIX-LISTEN carrying two streams at
# once (two clients, each to a sink of its own), --threads 2 (A) against
# --threads 1 (B) in pairs, A B A B, with the default engine (splice) and
# with copy, where vmio's own CPU is the limit. MB/s: both streams' bytes
# at the sinks, first byte to last; CPU: vmio's utime+stime from
# /proc/PID/stat as the data is in, per GiB of both streams. ----
tbytes=${REDIR_THREADS_BYTES:-2G} # per stream
tpairs=$((runs > 5 ? runs : 5))
declare -A tmb tcpu
for engine in splice copy; do
	echo
	echo "redirect --threads 2 against 1, fork, 2 streams of $tbytes, engine $engine, $tpairs pairs:"
	for p in $(seq "$tpairs"); do
		for t in 2 1; do
			rc=0
			line=$(timeout "$rlimit" "$build/vmio-redirect-bench" run \
				--sink "$dir/out" --to "ust:$dir/in" --bytes "$tbytes" \
				--streams 2 --term -- "$build/vmio" redirect -q \
				--engine "$engine" --threads "$t" \
				"UNIX-LISTEN:$dir/in,fork" "UNIX-CONNECT:$dir/out" 2>&1) || rc=$?
			if [ $rc -eq 0 ]; then
				echo "  pair $p, --threads $t: $line"
				tmb[$engine|$t]+="$(field MB/s "$line") "
				tcpu[$engine|$t]+="$(field relay_s/GiB "$line") "
			else
				echo "  FAILED: pair $p, --threads $t: ${line:-timed out after $rlimit s}"
				tmb[$engine|$t]+="- "
				tcpu[$engine|$t]+="- "
				failed=1
			fi
		done
	done
done

echo
echo "redirect --threads: a forking UNIX-LISTEN, two streams at once, pair by pair"
echo "(MB/s of both streams together; vmio's CPU s per GiB; x: 2 threads over 1)"
printf '%-7s %-6s %10s %10s %6s %12s %12s\n' engine pair "2 thr MB/s" "1 thr MB/s" x "2 thr s/GiB" "1 thr s/GiB"
for engine in splice copy; do
	read -ra a_mb <<<"${tmb[$engine|2]:-}"
	read -ra b_mb <<<"${tmb[$engine|1]:-}"
	read -ra a_cpu <<<"${tcpu[$engine|2]:-}"
	read -ra b_cpu <<<"${tcpu[$engine|1]:-}"
	for i in "${!a_mb[@]}"; do
		printf '%-7s %-6s %10s %10s %6s %12s %12s\n' "$engine" "$((i + 1))" \
			"${a_mb[$i]}" "${b_mb[$i]}" "$(ratio "${a_mb[$i]}" "${b_mb[$i]}")" \
			"${a_cpu[$i]}" "${b_cpu[$i]}"
	done
	am=$(list_median "${tmb[$engine|2]:-}")
	bm=$(list_median "${tmb[$engine|1]:-}")
	printf '%-7s %-6s %10s %10s %6s %12s %12s\n' "$engine" median "$am" "$bm" \
		"$(ratio "$am" "$bm")" "$(list_median "${tcpu[$engine|2]:-}")" \
		"$(list_median "${tcpu[$engine|1]:-}")"
done
fi

# ---- net: testpmd's virtio-user port against `vmio net --null` and
# net_vhost, then AF_XDP no-copy against copy (scripts/bench-net.sh) ----
if want net; then
	BUILD=$build RUNS=$runs "$top/scripts/bench-net.sh" || failed=1
fi

# ---- netlog: what dirty-page logging costs `vmio net --null`, in
# instructions per frame counted by callgrind (the load does not move
# them): logging off and on (per frame, as during a migration), txonly
# and rxonly at 64 and 1024 bytes, and NETLOG_BASE=DIR's vmio (a build
# of another commit, e.g. 410b256^, before logging) beside them
# (scripts/callgrind-net.sh) ----
if want netlog; then
	BASE=${NETLOG_BASE:-} "$top/scripts/callgrind-net.sh" "$build" || failed=1
fi

# ---- isolation: one `vmio vsock` with two VMs; A's guest-to-host rate
# alone against A's rate while vmio-bad-vmm misbehaves on B's socket, of
# each kind (scripts/bench-isolation.sh) ----
if want isolation; then
	BUILD=$build RUNS=$runs "$top/scripts/bench-isolation.sh" || failed=1
fi

# ---- scale: one `vmio vsock` with 256 VMs and 1024 idle connections each
# (as many as RLIMIT_NOFILE allows), 8 of them streaming among the rest;
# two VMs with --threads 2 against 1; head-of-line latency
# (scripts/bench-scale.sh) ----
if want scale; then
	BUILD=$build RUNS=$runs "$top/scripts/bench-scale.sh" || failed=1
fi

# ---- handover: the pause a streaming guest sees while `vmio vsock` hands
# over to a successor (one VM with 1000 connections; 256 VMs with 64
# each), and descriptors and mappings after 100 hand-overs in a row
# (scripts/bench-scale.sh, part handover) ----
if want handover; then
	BUILD=$build SCALE_PARTS=handover "$top/scripts/bench-scale.sh" || failed=1
fi
exit $failed
