#!/bin/bash
# One `vmio vsock` with two VMs: A (CID 3) streams guest to host with
# vmio-vsock-bench, alone and with VM B's vhost-user socket held by
# vmio-bad-vmm of each kind (a partial message held open; partial
# messages with reconnects, 1050 ms apart: a bit over the default
# --message-timeout; requests whose replies are never read;
# connect/disconnect churn; a header whose size says 2 GiB; a session
# whose kick eventfds are written without end, nothing new in the rings),
# and, as a control, no VMM at all but a process spinning on the CPU
# (cpu-hog), in pairs (alone, with, alone, with, ...). Per kind: A's MB/s
# as medians, vmio's CPU seconds per GiB beside each, the ratio
# with/alone of the medians (goal >= 0.9), the CPU vmio spent on B per
# second of A's run (B's cpu_us in vmio's own counters, --control; goal:
# at most 0.05 of a core for a neighbour with no work), then the ratios
# pair by pair. A run that fails
# or passes ISO_TIMEOUT seconds (default 30) counts as "-"; vmio's log
# goes to a file of its own. Runs are 8 GiB by default (a few seconds
# each), long enough for the neighbour's deadlines and reconnects to
# happen during A's run.
#   RUNS=5 ISO_BYTES=8G KINDS="partial no-read" ISO_OPTS="--message-timeout 1000" \
#     scripts/bench-isolation.sh
# (from scripts/bench.sh: SECTIONS=isolation make bench)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
runs=${RUNS:-5}
bytes=${ISO_BYTES:-8G}
kinds=${KINDS:-partial partial-reconnect no-read churn huge-size kick-storm cpu-hog}
limit=${ISO_TIMEOUT:-30}
read -r -a vmio_opts <<<"${ISO_OPTS:-}"
dir=$(mktemp -d)
vpid=
bpid=
# shellcheck source=bench-stats.sh
. "$(dirname "$0")/bench-stats.sh"
# shellcheck source=bench-procs.sh
. "$(dirname "$0")/bench-procs.sh"
cleanup() {
	# shellcheck disable=SC2086 # the empty ones go
	stop_procs $bpid $vpid
	rm -rf "$dir"
}
trap cleanup EXIT

for t in vmio vmio-vsock-bench vmio-bad-vmm; do
	if [ ! -x "$build/$t" ]; then
		echo "bench-isolation: $build/$t is missing (ninja -C $build)" >&2
		exit 2
	fi
done

"$build/vmio" vsock -q "${vmio_opts[@]}" 2>"$dir/vmio.log" \
	--control "$dir/c.sock" \
	--vm "guest-cid=3,socket=$dir/a.sock,uds-path=$dir/a.vsock" \
	--vm "guest-cid=4,socket=$dir/b.sock,uds-path=$dir/b.vsock" &
vpid=$!
wait_sockets "$vpid" "$dir/a.sock" "$dir/b.sock" || true

# The CPU time vmio's counters give VM $1 (0: A, 1: B), in microseconds,
# or 0.
vm_cpu_us() {
	"$build/vmio" stats --json "$dir/c.sock" 2>/dev/null | python3 -c '
import json, sys
print(json.load(sys.stdin)["vms"][int(sys.argv[1])]["cpu_us"])' "$1" \
		2>/dev/null || echo 0
}

# One timed stream of A: sets mb (MB/s or -), cpu (vmio s/GiB or -) and
# bcore (what vmio spent on B over the run, in cores).
one_run() {
	local line c0 c1 b0 b1 t0 t1 rc=0
	b0=$(vm_cpu_us 1)
	t0=$(date +%s%N)
	c0=$(cpu_ticks "$vpid")
	line=$(timeout "$limit" "$build/vmio-vsock-bench" --socket "$dir/a.sock" \
		--uds-path "$dir/a.vsock" --bytes "$bytes" 2>&1) || rc=$?
	c1=$(cpu_ticks "$vpid")
	t1=$(date +%s%N)
	b1=$(vm_cpu_us 1)
	bcore=$(awk -v b="$((b1 - b0))" -v ns="$((t1 - t0))" \
		'BEGIN { printf "%.3f", b / 1e6 / (ns / 1e9) }')
	mb=- cpu=-
	if [ $rc -ne 0 ]; then
		echo "    FAILED (status $rc): ${line:-timed out after $limit s}"
		return
	fi
	mb=$(sed -n 's/.*MB\/s=\([0-9.]*\).*/\1/p' <<<"$line")
	local got
	got=$(sed -n 's/.* bytes=\([0-9]*\).*/\1/p' <<<"$line")
	cpu=$(s_per_gib "$c0" "$c1" "$got")
	echo "    $line vmio_s/GiB=$cpu B_cores=$bcore"
}

# The misbehaver of kind $1 on B's socket, once it says it misbehaves.
bad_start() {
	local hold=()
	if [ "$1" = cpu-hog ]; then
		# No VMM: the machine's CPU taken, the control for the others.
		sh -c 'while :; do :; done' &
		bpid=$!
		echo "vmio-bad-vmm: kind=cpu-hog (a spinning sh, no VMM)" >"$dir/bad.out"
		return 0
	fi
	[ "$1" = partial-reconnect ] && hold=(--hold-ms "${ISO_RECONNECT_HOLD_MS:-1050}")
	"$build/vmio-bad-vmm" --socket "$dir/b.sock" --kind "$1" "${hold[@]}" \
		>"$dir/bad.out" 2>&1 &
	bpid=$!
	for _ in $(seq 200); do
		grep -q '^ready' "$dir/bad.out" && return 0
		sleep 0.05
	done
	echo "    vmio-bad-vmm --kind $1 never got going" >&2
}

bad_stop() {
	kill "$bpid" 2>/dev/null || true
	wait "$bpid" 2>/dev/null || echo "    vmio-bad-vmm exited with status $?"
	bpid=
	echo "    $(grep '^vmio-bad-vmm:' "$dir/bad.out" || echo 'vmio-bad-vmm said nothing')"
}

declare -A a_mb a_cpu w_mb w_cpu w_b pair
failed=0
for kind in $kinds; do
	echo "isolation: A g2h 64 KiB writes of $bytes, alone and beside B held by $kind, $runs pairs:"
	for _ in $(seq "$runs"); do
		echo "  alone:"
		one_run
		a=$mb
		a_mb[$kind]+="$mb " a_cpu[$kind]+="$cpu "
		echo "  with $kind:"
		bad_start "$kind"
		one_run
		bad_stop
		w_mb[$kind]+="$mb " w_cpu[$kind]+="$cpu " w_b[$kind]+="$bcore "
		pair[$kind]+="$(ratio "$mb" "$a") "
		[ "$a" = - ] || [ "$mb" = - ] && failed=1
		if ! kill -0 "$vpid" 2>/dev/null; then
			echo "bench-isolation: vmio is gone" >&2
			exit 1
		fi
	done
done

echo
echo "isolation: A's MB/s (medians of $runs interleaved pairs, $bytes each, g2h 64 KiB)"
echo "alone and with B's socket held by a misbehaving VMM; vmio's CPU s/GiB beside"
echo "each; ratio = with/alone of the medians (goal >= 0.9); B cores: what"
echo "vmio spent on B (its cpu_us) over A's run, in cores (median); then each pair's"
printf '%-18s %9s %8s %9s %8s %6s %8s  %s\n' neighbour alone s/GiB with s/GiB ratio "B cores" "each pair"
for kind in $kinds; do
	am=$(list_median "${a_mb[$kind]}")
	wm=$(list_median "${w_mb[$kind]}")
	printf '%-18s %9s %8s %9s %8s %6s %8s  %s\n' "$kind" "$am" \
		"$(list_median "${a_cpu[$kind]}")" "$wm" \
		"$(list_median "${w_cpu[$kind]}")" "$(ratio "$wm" "$am")" \
		"$(list_median "${w_b[$kind]}")" "${pair[$kind]}"
done
exit $failed
