#!/bin/bash
# Whether a change made vsock slower: builds two commits (each with its
# own front end, vmio-vsock-bench) in worktrees of their own and
# runs the same vsock rows through each, interleaved (A B A B ...), with
# the direct AF_UNIX anchor in the same rounds. Prints MB/s medians, B/A
# pair by pair, and each vmio's CPU seconds per GiB. A run that fails is
# shown (FAILED: row, commit, why), left out, and makes the exit status 1.
#   scripts/bench-commits.sh A B            (e.g. bf24d82 HEAD)
#   RUNS=7 ROWS="g2h:4096:1 h2g:64:1" scripts/bench-commits.sh A B
# A row is direction:message size:connections. A direction echo-h2g or
# echo-g2h is a request/response row instead (vmio-vsock-bench --echo,
# ECHO_SECONDS each, default 5; the request goes that way): round trips
# a second, vmio's CPU seconds per 1000 round trips, and the median and
# p99 round trip in microseconds.
#   BENCH=build/vmio-vsock-bench ROWS="echo-h2g:64:1 h2g:64:1" \
#     scripts/bench-commits.sh 88abac7 main
# BENCH: one vmio-vsock-bench drives both vmios (an older commit's may
# have no --echo). An argument that is a build directory (holding vmio)
# is used as it is, named by its tree's commit, instead of a commit to
# build: builds then need not run under the benchmark's CPU lock.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
if [ $# -ne 2 ]; then
	echo "usage: scripts/bench-commits.sh REV_A|BUILD_DIR_A REV_B|BUILD_DIR_B" >&2
	exit 2
fi
runs=${RUNS:-5}
rows=${ROWS:-g2h:65536:1 h2g:65536:1 g2h:4096:1 h2g:4096:1 g2h:64:1 h2g:64:1}
echo_s=${ECHO_SECONDS:-5}
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

declare -A vpid built name
for s in a b; do
	rev=$1
	[ "$s" = b ] && rev=$2
	if [ -x "$rev/vmio" ]; then
		built[$s]=$(cd "$rev" && pwd)
		name[$s]="$(git -C "$rev" describe --always --dirty 2>/dev/null || echo '?') ($rev)"
	else
		git worktree add --detach "$dir/$s" "$rev" >/dev/null 2>&1
		meson setup "$dir/$s/build" "$dir/$s" -Dguest_tests=false >/dev/null
		ninja -C "$dir/$s/build" vmio vmio-vsock-bench >/dev/null
		built[$s]=$dir/$s/build
		name[$s]="$(git rev-parse --short "$rev") ($rev)"
	fi
	"${built[$s]}/vmio" vsock --guest-cid 3 --socket "$dir/$s.sock" \
		--uds-path "$dir/$s.vsock" -q &
	vpid[$s]=$!
	pids+=("$!")
	for _ in $(seq 200); do
		[ -S "$dir/$s.sock" ] && break
		sleep 0.05
	done
done
bench_of() { echo "${BENCH:-${built[$1]}/vmio-vsock-bench}"; }
last() { awk '{print $NF}' <<<"$1"; }

echo "vsock, ${name[a]} (A) against ${name[b]} (B), $runs interleaved rounds; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "stream rows: MB/s, vmio CPU s/GiB; echo rows: round trips/s, vmio CPU s/1000 round trips"
printf '%-16s %9s %9s %7s %9s %7s %7s  %s\n' row direct A "s/unit" B "s/unit" B/A "pair by pair"
rtt=()
failed=0
for row in $rows; do
	IFS=: read -r d msg c <<<"$row"
	declare -A got=() cpu=() p50=() p99=()
	ratios='' r50='' r99=''
	if [[ $d == echo-* ]]; then
		args=(--echo --direction "${d#echo-}" --msg-size "$msg" --conns "$c" --seconds "$echo_s")
		key=rr/s
	else
		args=(--direction "$d" --msg-size "$msg" --conns "$c" --bytes "${vbytes[$msg]:-256M}")
		key=MB/s
	fi
	for _ in $(seq "$runs"); do
		line=$("$(bench_of a)" --direct "${args[@]}")
		got[direct]+="$(field "$key" "$line") "
		for s in a b; do
			c0=$(cpu_ticks "${vpid[$s]}")
			if ! line=$("$(bench_of "$s")" --socket "$dir/$s.sock" --uds-path "$dir/$s.vsock" "${args[@]}" 2>&1); then
				# Recorded as "-", the run is left out of the medians.
				echo "FAILED: $d $msg x$c, ${name[$s]}: $line"
				failed=1
				line=
			fi
			c1=$(cpu_ticks "${vpid[$s]}")
			if [ -z "$line" ]; then
				got[$s]+="- " cpu[$s]+="- " p50[$s]+="- " p99[$s]+="- "
			elif [[ $d == echo-* ]]; then
				got[$s]+="$(field "$key" "$line") "
				cpu[$s]+="$(field vmio_s/1000rt "$line") "
				p50[$s]+="$(field p50_us "$line") "
				p99[$s]+="$(field p99_us "$line") "
			else
				got[$s]+="$(field "$key" "$line") "
				cpu[$s]+="$(s_per_gib "$c0" "$c1" "$(field bytes "$line")") "
			fi
		done
		ratios+="$(ratio "$(last "${got[b]}")" "$(last "${got[a]}")") "
		if [[ $d == echo-* ]]; then
			r50+="$(ratio "$(last "${p50[b]}")" "$(last "${p50[a]}")") "
			r99+="$(ratio "$(last "${p99[b]}")" "$(last "${p99[a]}")") "
		fi
	done
	printf '%-16s %9s %9s %7s %9s %7s %7s  %s\n' "$d $msg x$c" \
		"$(list_median "${got[direct]}")" "$(list_median "${got[a]}")" \
		"$(list_median "${cpu[a]}")" "$(list_median "${got[b]}")" \
		"$(list_median "${cpu[b]}")" "$(list_median "$ratios")" "$ratios"
	if [[ $d == echo-* ]]; then
		rtt+=("$(printf '%-16s %-4s %9s %9s %7s  %s' "$d $msg x$c" p50 \
			"$(list_median "${p50[a]}")" "$(list_median "${p50[b]}")" \
			"$(list_median "$r50")" "$r50")")
		rtt+=("$(printf '%-16s %-4s %9s %9s %7s  %s' "$d $msg x$c" p99 \
			"$(list_median "${p99[a]}")" "$(list_median "${p99[b]}")" \
			"$(list_median "$r99")" "$r99")")
	fi
done
if [ ${#rtt[@]} -gt 0 ]; then
	echo
	echo "echo rows: round trip times in microseconds, medians over the runs (B/A below 1: B is faster)"
	printf '%-16s %-4s %9s %9s %7s  %s\n' row "" A B B/A "pair by pair"
	printf '%s\n' "${rtt[@]}"
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $failed
