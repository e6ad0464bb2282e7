#!/bin/bash
# `vmio vsock` at scale, without a VM (issue 12, part 5): vmio-scale plays
# the guests (one in-tree driver per VM, all in one process) and the host
# programs (in its children); vmio-vsock-bench the lone streams. Parts
# (SCALE_PARTS, default all; "idle" includes busy):
#   idle     one vmio, SCALE_VMS VMs (256) with SCALE_CONNS (1024)
#            established idle guest-to-host connections each, every one
#            held by a host listener: vmio's RSS growth per connection
#            (goal <= 4 KiB), the time to open them all, its descriptors
#   busy     then SCALE_BUSY (8) of those VMs stream 64 KiB writes guest to
#            host (SCALE_BYTES a run) among the idle rest, against the same
#            streams through a second vmio serving only those VMs, in RUNS
#            interleaved pairs with both vmio kept alive (goal: >= 0.9);
#            both with --threads SCALE_THREADS (default: nproc)
#   threads  two VMs streaming at once, each from its own vmio-vsock-bench
#            process (SCALE_THREAD_BYTES each): `--threads 2` against
#            `--threads 1`, RUNS pairs, and each vmio thread's CPU seconds
#            per GiB (goal here >= 1.3x)
#   latency  one VM bulk-streaming, SCALE_LAT_VMS - 1 (15) VMs doing
#            64-byte request/response: p50 and p99 with the streamer idle
#            and running, `--threads 1` and `--threads 2`
#   handover (not among the defaults: scripts/bench.sh's handover
#            section) what a hand-over (`vmio reload`) costs streaming
#            guests: one VM with HO_CONNS (1000) connections, and
#            HO_VMS (256) VMs with HO_VM_CONNS (64) each on --threads 2,
#            4 of the connections two-way streams (every byte checked);
#            HO_RELOADS (20) reloads each: the pause (median, worst), the
#            time `vmio reload` took, vmio's CPU per hand-over; then
#            HO_LEAK_RELOADS (100) reloads in a row of the one VM, and
#            HO_VMS_LEAK_RELOADS (5) of the 256, the streams quiet: the
#            serving vmio's descriptors and mappings before and after;
#            HO_LOG=FILE keeps vmio's log (with SCALE_VMIO_OPTS=-v, the
#            steps of each hand-over, timed)
# One host socket per connection: vmio's RLIMIT_NOFILE is raised to fit
# (ulimit -n; past the hard limit only with CAP_SYS_RESOURCE). Where that
# is out of reach the default SCALE_CONNS shrinks to what fits, and says
# so; a SCALE_CONNS asked for is refused. SCALE_VMIO_OPTS goes to every
# vmio.
#   SCALE_VMS=4 SCALE_CONNS=16 SCALE_PARTS="idle threads" RUNS=3 \
#     scripts/bench-scale.sh
# (from scripts/bench.sh: SECTIONS=scale make bench)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
runs=${RUNS:-5}
vms=${SCALE_VMS:-256}
conns=${SCALE_CONNS:-1024}
conns_given=${SCALE_CONNS:+yes}
busy=${SCALE_BUSY:-$((vms < 8 ? vms : 8))}
busy_bytes=${SCALE_BYTES:-2G}
thread_bytes=${SCALE_THREAD_BYTES:-4G}
lat_vms=${SCALE_LAT_VMS:-16}
lat_rounds=${SCALE_LAT_ROUNDS:-3}
lat_phase_ms=${SCALE_LAT_PHASE_MS:-2000}
ho_conns=${HO_CONNS:-1000}
ho_vms=${HO_VMS:-256}
ho_vm_conns=${HO_VM_CONNS:-64}
ho_vm_conns_given=${HO_VM_CONNS:+yes}
ho_reloads=${HO_RELOADS:-20}
ho_leak_reloads=${HO_LEAK_RELOADS:-100}
ho_vms_leak_reloads=${HO_VMS_LEAK_RELOADS:-5}
parts=" ${SCALE_PARTS:-idle threads latency} "
# Bounds each tool run: their own stall checks (10 s) catch the rest.
limit=${SCALE_TIMEOUT:-900}
read -r -a vmio_opts <<<"${SCALE_VMIO_OPTS:-}"
dir=$(mktemp -d)
vpids=()
bpids=()
# shellcheck source=bench-stats.sh
. "$(dirname "$0")/bench-stats.sh"
# shellcheck source=bench-procs.sh
. "$(dirname "$0")/bench-procs.sh"
cleanup() {
	stop_procs "${bpids[@]}" "${vpids[@]}"
	rm -rf "$dir"
}
trap cleanup EXIT

want() { [[ "$parts" == *" $1 "* ]]; }
failed=0

for t in vmio vmio-scale vmio-vsock-bench; do
	if [ ! -x "$build/$t" ]; then
		echo "bench-scale: $build/$t is missing (ninja -C $build)" >&2
		exit 2
	fi
done

# write_config NAME N [WORKERS]: N VMs (CIDs from 3) in $dir/NAME.yaml,
# their sockets $dir/NAME<i>.sock and uds-paths $dir/NAME<i>.vsock; with
# WORKERS, VM i on worker i % WORKERS (thread=K), said outright so that
# vmio-scale can tell which VMs share a worker.
write_config() {
	local i
	{
		echo "vms:"
		for ((i = 0; i < $2; i++)); do
			echo "  - guest-cid: $((3 + i))"
			echo "    socket: $dir/$1$i.sock"
			echo "    uds-path: $dir/$1$i.vsock"
			[ -z "${3:-}" ] || echo "    thread: $((i % $3))"
		done
	} >"$dir/$1.yaml"
}

# Whether this shell may give a child RLIMIT_NOFILE n (past the hard
# limit only with CAP_SYS_RESOURCE, and never past fs.nr_open).
nofile_ok() { (ulimit -n "$1") 2>/dev/null; }

nofile_why() { # n: why nofile_ok n fails
	echo "RLIMIT_NOFILE $1 is out of reach: hard limit $(ulimit -Hn)," \
		"fs.nr_open $(cat /proc/sys/fs/nr_open); raising the hard limit" \
		"needs CAP_SYS_RESOURCE (root in the initial namespace)"
}

# vmio A's descriptors: one per connection (the idle ones and the stream),
# and each VM's own (listeners, vhost-user connection, eventfds: 8).
vmio_nofile() { echo $(($1 * ($2 + 1) + $1 * 10 + 256)); }

# start_vmio NAME NOFILE ARGS...: `vmio vsock --config $dir/NAME.yaml
# ARGS` with RLIMIT_NOFILE at NOFILE, once every VM's socket is there;
# its pid in vpid (and vpids). Logs go to $dir/vmio.log.
start_vmio() {
	local name=$1 nofile=$2 socks
	shift 2
	if ! nofile_ok "$nofile"; then
		echo "bench-scale: $(nofile_why "$nofile")" >&2
		exit 1
	fi
	(ulimit -n "$nofile" && exec "$build/vmio" vsock -q "${vmio_opts[@]}" \
		--config "$dir/$name.yaml" "$@") 2>>"$dir/vmio.log" &
	vpid=$!
	vpids+=("$vpid")
	mapfile -t socks < <(sed -n 's/^ *socket: //p' "$dir/$name.yaml")
	wait_sockets "$vpid" "${socks[@]}" && return 0
	echo "bench-scale: vmio vsock --config $dir/$name.yaml did not come up:" >&2
	cat "$dir/vmio.log" >&2
	exit 1
}

stop_vmio() { # pid
	stop_procs "$1"
	local keep=() p
	for p in "${vpids[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	vpids=("${keep[@]}")
}

has_threads() { "$build/vmio" vsock --help 2>&1 | grep -q -- '--threads'; }

# ---- idle and busy ----
if want idle; then
	# Where descriptors cannot be had for the default count, the default
	# shrinks to what fits, and says so; a count asked for is refused.
	if ! nofile_ok "$(vmio_nofile "$vms" "$conns")"; then
		if [ -n "$conns_given" ]; then
			echo "bench-scale: SCALE_CONNS=$conns: $(nofile_why "$(vmio_nofile "$vms" "$conns")")" >&2
			exit 1
		fi
		hard=$(ulimit -Hn)
		conns=$(((hard - 256) / vms - 11))
		if [ "$conns" -lt 1 ]; then
			echo "bench-scale: $(nofile_why "$(vmio_nofile "$vms" 1)")" >&2
			exit 1
		fi
		echo "scale idle: NOT AT FULL SCALE: $(nofile_why "$(vmio_nofile "$vms" 1024)");"
		echo "scale idle: $conns connections per VM instead of 1024, what RLIMIT_NOFILE $hard allows"
	fi
	# Both vmio with the same workers, VM i on worker i % workers, so
	# that the streamers spread over them alike on both sides.
	wargs=() wsay=
	if has_threads; then
		workers=${SCALE_THREADS:-$(nproc)}
		wargs=(--threads "$workers") wsay=", --threads $workers"
	fi
	write_config a "$vms" "${workers:-}"
	write_config b "$busy" "${workers:-}"
	start_vmio a "$(vmio_nofile "$vms" "$conns")" --max-connections $((conns + 1)) "${wargs[@]}"
	apid=$vpid
	start_vmio b 4096 "${wargs[@]}"
	bpid=$vpid
	echo "scale idle: $vms VMs x $conns idle guest-to-host connections in one vmio" \
		"(--max-connections $((conns + 1)): the idle ones and a stream$wsay)"
	echo "scale busy: then $busy of them stream 64 KiB writes, $busy_bytes a run," \
		"against $busy VMs of a vmio serving nothing else, $runs pairs:"
	rc=0
	timeout "$limit" "$build/vmio-scale" idle --config "$dir/a.yaml" --pid "$apid" \
		--conns "$conns" --busy "$busy" --alone-config "$dir/b.yaml" \
		--alone-pid "$bpid" --pairs "$runs" --bytes "$busy_bytes" \
		>"$dir/idle.out" 2>&1 || rc=$?
	sed 's/^/  /' "$dir/idle.out"
	[ $rc -eq 0 ] || { echo "  FAILED (status $rc)"; failed=1; }
	declare -A mb cpu
	mb=() cpu=()
	pairs=
	while read -r line; do
		side=$(field vmio "$line")
		mb[$side]+="$(field MB/s "$line") "
		cpu[$side]+="$(field vmio_s/GiB "$line") "
		if [ "$side" = alone ]; then
			pairs+="$(ratio "$last" "$(field MB/s "$line")") "
		else
			last=$(field MB/s "$line")
		fi
	done < <(grep '^busy run=' "$dir/idle.out")
	est=$(grep '^idle vms=' "$dir/idle.out" || true)
	mem=$(grep '^idle rss_kib=' "$dir/idle.out" || true)
	fds=$(grep '^idle fds=' "$dir/idle.out" || true)
	echo
	if [ -z "$est" ]; then
		echo "scale idle: no figures"
	else
		echo "scale idle: $vms VMs x $conns connections = $(field conns "$est") established and held"
		printf '  %-34s %s\n' "time to establish them all" "$(field establish_s "$est") s ($(field conns/s "$est") per s)" \
			"vmio VmRSS (KiB, before -> after)" "$(field rss_kib "$mem") $(sed -n 's/.*\((before:[^)]*)\).*/\1/p' <<<"$mem")" \
			"RSS growth per connection" "$(field B/conn "$mem") B (goal <= 4096) $(sed -n 's/.*\((anon=[^)]*)\).*/\1/p' <<<"$mem")" \
			"vmio descriptors (before -> after)" "$(field fds "$fds") ($(field fds/conn "$fds") per connection)"
		echo "scale busy: $busy VMs streaming g2h, medians of $runs interleaved pairs (MB/s; vmio CPU s/GiB)"
		printf '  %-22s %9s %8s\n' "" MB/s s/GiB
		printf '  %-22s %9s %8s\n' "among $((vms - busy)) idle VMs" \
			"$(list_median "${mb[among-idle]:-}")" "$(list_median "${cpu[among-idle]:-}")" \
			"alone" "$(list_median "${mb[alone]:-}")" "$(list_median "${cpu[alone]:-}")"
		echo "  ratio among-idle/alone of the medians: $(ratio "$(list_median "${mb[among-idle]:-}")" \
			"$(list_median "${mb[alone]:-}")") (goal >= 0.9); each pair: ${pairs:--}"
	fi
	stop_vmio "$apid"
	stop_vmio "$bpid"
fi

# ---- threads: two streams at once, --threads 2 against --threads 1 ----

# Each thread's CPU ticks, "tid ticks comm" a line (comm may hold spaces,
# so the fields are counted from the last ')').
task_ticks() {
	local t
	for t in /proc/"$1"/task/*; do
		awk -v tid="${t##*/}" -v comm="$(tr ' ' _ <"$t/comm" 2>/dev/null)" \
			'{sub(/.*\) /, ""); print tid, $12 + $13, comm}' "$t/stat" 2>/dev/null || true
	done
}

# The two streams of one run through the vmio of config NAME: sets agg
# (MB/s, both runs' bytes over the longer one's time, or -) and tcpu
# ("comm:s/GiB ..." per thread, in tid order).
two_streams() {
	local name=$1 pid=$2 i rc=0 b=0 tmax=0 line
	local before after
	before=$(task_ticks "$pid")
	for i in 0 1; do
		timeout "$limit" "$build/vmio-vsock-bench" --socket "$dir/$name$i.sock" \
			--uds-path "$dir/$name$i.vsock" --guest-cid $((3 + i)) \
			--bytes "$thread_bytes" \
			>"$dir/two$i.out" 2>&1 &
		bpids+=($!)
	done
	for p in "${bpids[@]}"; do
		wait "$p" || rc=$?
	done
	bpids=()
	after=$(task_ticks "$pid")
	agg=- tcpu=
	if [ $rc -ne 0 ]; then
		echo "    FAILED: $(cat "$dir/two0.out" "$dir/two1.out")"
		failed=1
		return
	fi
	for i in 0 1; do
		line=$(cat "$dir/two$i.out")
		b=$((b + $(field bytes "$line")))
		tmax=$(awk -v a="$tmax" -v t="$(field time "$line")" 'BEGIN {print (t > a) ? t : a}')
	done
	agg=$(awk -v b="$b" -v t="$tmax" 'BEGIN {printf "%.1f", b / 1e6 / t}')
	while read -r _ t0 comm t1 _; do
		tcpu+="$comm:$(s_per_gib "$t0" "$t1" "$b") "
	done < <(join <(sort <<<"$before") <(sort <<<"$after") | sort -n)
	echo "    $(cat "$dir/two0.out")"
	echo "    $(cat "$dir/two1.out")"
	echo "    aggregate MB/s=$agg; vmio CPU s/GiB per thread: $tcpu"
}

if want threads; then
	if ! has_threads; then
		echo "threads: vmio has no --threads yet"
	else
		write_config t1_ 2
		write_config t2_ 2
		start_vmio t1_ 4096 --threads 1
		t1pid=$vpid
		start_vmio t2_ 4096 --threads 2
		t2pid=$vpid
		declare -A tagg tthr
		tagg=() tthr=()
		tpairs=
		echo "threads: two VMs streaming g2h at once from two vmio-vsock-bench, $thread_bytes each, $runs pairs:"
		for r in $(seq "$runs"); do
			echo "  pair $r, --threads 1:"
			two_streams t1_ "$t1pid"
			tagg[1]+="$agg " a1=$agg
			tthr[1]+="$tcpu|"
			echo "  pair $r, --threads 2:"
			two_streams t2_ "$t2pid"
			tagg[2]+="$agg "
			tthr[2]+="$tcpu|"
			tpairs+="$(ratio "$agg" "$a1") "
		done
		echo
		echo "threads: aggregate MB/s of two VMs streaming at once, medians of $runs interleaved pairs"
		for t in 1 2; do
			# Median s/GiB of each thread, threads in tid order.
			per=$(tr '|' '\n' <<<"${tthr[$t]}" | awk '
				NF { for (i = 1; i <= NF; i++) { split($i, f, ":"); v[i] = v[i] " " f[2]; n[i] = f[1] }; if (NF > m) m = NF }
				END { for (i = 1; i <= m; i++) print n[i], v[i] }' |
				while read -r comm vals; do
					printf '%s %s s/GiB, ' "$comm" "$(list_median "$vals")"
				done)
			printf '  --threads %s: %8s MB/s; vmio per thread: %s\n' "$t" \
				"$(list_median "${tagg[$t]}")" "${per%, }"
		done
		echo "  ratio --threads 2 / --threads 1 of the medians: $(ratio \
			"$(list_median "${tagg[2]}")" "$(list_median "${tagg[1]}")") (goal >= 1.3); each pair: $tpairs"
		stop_vmio "$t1pid"
		stop_vmio "$t2pid"
	fi
fi

# ---- latency: head of line ----
if want latency; then
	if has_threads; then
		tlist=(1 2)
	else
		echo "latency: vmio has no --threads yet: one loop only"
		tlist=(-)
	fi
	rows=()
	for t in "${tlist[@]}"; do
		targs=()
		if [ "$t" = - ]; then
			write_config l "$lat_vms"
		else
			write_config l "$lat_vms" "$t"
			targs=(--threads "$t")
		fi
		start_vmio l 4096 "${targs[@]}"
		lpid=$vpid
		echo "latency: VM 0 bulk-streaming g2h, $((lat_vms - 1)) VMs doing 64-byte request/response," \
			"${lat_rounds} rounds of ${lat_phase_ms} ms idle and running${targs[*]:+, ${targs[*]}}:"
		rc=0
		timeout "$limit" "$build/vmio-scale" latency --config "$dir/l.yaml" \
			--rounds "$lat_rounds" --phase-ms "$lat_phase_ms" \
			>"$dir/lat.out" 2>&1 || rc=$?
		sed 's/^/  /' "$dir/lat.out"
		[ $rc -eq 0 ] || { echo "  FAILED (status $rc)"; failed=1; }
		while read -r line; do
			rows+=("${t/-/1 (only)}|$(field bulk "$line")|$(field vms "$line")|$(field p50_us "$line")|$(field p99_us "$line")|$(field rr/s "$line")|$(field bulk_MB/s "$line")")
		done < <(grep '^latency bulk=' "$dir/lat.out")
		stop_vmio "$lpid"
	done
	echo
	echo "latency: 64-byte round trips of $((lat_vms - 1)) VMs (one outstanding each) beside VM 0 idle and bulk-streaming;"
	echo "VM i on worker i % threads: same-worker/other-worker split VM 0's worker from the other"
	printf '  %-9s %-8s %-13s %9s %9s %9s %10s\n' threads bulk VMs p50_us p99_us rr/s bulk_MB/s
	for row in "${rows[@]}"; do
		IFS='|' read -r t bulk grp p50 p99 rate bmb <<<"$row"
		printf '  %-9s %-8s %-13s %9s %9s %9s %10s\n' "$t" "$bulk" "$grp" "$p50" "$p99" "$rate" "${bmb:--}"
	done
fi

# ---- handover: the pause a reload costs streaming guests, and leaks ----
if want handover; then
	# vmio holds a descriptor per connection and about 10 per VM; a
	# hand-over copies each VM's session descriptors first (about 6
	# more per VM): what one vmio of n VMs with c connections each takes.
	ho_nofile() { echo $(($1 * ($2 + 16) + 256)); }
	hard=$(ulimit -Hn)
	ho_say=
	if [ "$hard" != unlimited ] && [ "$(ho_nofile "$ho_vms" "$ho_vm_conns")" -gt "$hard" ]; then
		if [ -n "$ho_vm_conns_given" ]; then
			echo "bench-scale: HO_VM_CONNS=$ho_vm_conns: $(nofile_why "$(ho_nofile "$ho_vms" "$ho_vm_conns")")" >&2
			exit 1
		fi
		want_conns=$ho_vm_conns
		ho_vm_conns=$(((hard - 256) / ho_vms - 16))
		ho_say="NOT AT FULL SCALE: $(nofile_why "$(ho_nofile "$ho_vms" "$want_conns")"); $ho_vm_conns connections per VM instead of $want_conns"
	fi
	write_config h1_ 1
	write_config h256_ "$ho_vms"
	ho_cases=("1 VM x $ho_conns conns|h1_|$ho_conns|$ho_leak_reloads|20|--max-connections 4096"
		"$ho_vms VMs x $ho_vm_conns conns|h256_|$ho_vm_conns|$ho_vms_leak_reloads|250|--threads 2 --max-connections $ho_vm_conns")
	ho_rows=()
	ho_leak=()
	echo "handover: machine load before: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min; $(nproc) cores)"
	[ -z "$ho_say" ] || echo "handover: $ho_say"
	for c in "${ho_cases[@]}"; do
		IFS='|' read -r what name n leaks goal vopts <<<"$c"
		read -r -a vo <<<"$vopts"
		echo "handover $what: $ho_reloads reloads while 4 two-way streams run, then $leaks in a row:"
		rc=0
		timeout "$limit" "$build/vmio-scale" handover --config "$dir/$name.yaml" \
			--vmio "$build/vmio" --control "$dir/$name.ctl" --log "$dir/vmio.log" \
			--conns "$n" --reloads "$ho_reloads" --leak-reloads "$leaks" \
			-- "${vmio_opts[@]}" "${vo[@]}" >"$dir/ho.out" 2>&1 || rc=$?
		sed 's/^/  /' "$dir/ho.out"
		[ $rc -eq 0 ] || { echo "  FAILED (status $rc)"; failed=1; }
		p=$(grep '^handover pauses ' "$dir/ho.out" || true)
		l=$(grep '^handover leaks reloads=.* fds=' "$dir/ho.out" || true)
		lc=$(grep '^handover leaks reloads=.* reload_ms_median=' "$dir/ho.out" || true)
		[ -n "$p" ] && ho_rows+=("$what|$(field reloads "$p")|$(field pause_ms_median "$p")|$(field pause_ms_worst "$p")|$goal|$(field gap_between_ms_median "$p")|$(field gap_between_ms_worst "$p")|$(field reload_ms_median "$p")|$(field vmio_cpu_ms_median "$p")|$(field vmio_cpu_ms_median "$lc")")
		if [ -n "$l" ]; then
			ho_leak+=("$(field reloads "$l") hand-overs in a row, $what: descriptors $(field fds "$l"), mappings $(field maps "$l") (serving vmio before -> after): ${l##* }")
		fi
	done
	echo "handover: machine load after: $(cut -d' ' -f1-3 /proc/loadavg)"
	[ -z "${HO_LOG:-}" ] || cp "$dir/vmio.log" "$HO_LOG"
	echo
	echo "handover: the pause a streaming guest sees across a hand-over (the largest gap between two reads of a stream that spans the reload, worst of 4 streams x 2 ways), ms;"
	echo "beside it the largest gap in the 300 ms of streaming after each reload (no reload in it: the machine's own noise), the time \`vmio reload\` took,"
	echo "and vmio's CPU ms per hand-over (the old process from the request to its exit, the successor up to then; streaming: with the streams' traffic)"
	printf '  %-26s %7s %9s %9s %5s %11s %11s %10s %11s %11s\n' case reloads "pause med" "worst" goal "noise med" "noise worst" "reload med" "CPU stream" "CPU quiet"
	for row in "${ho_rows[@]}"; do
		IFS='|' read -r what k pm pw goal bm bw rm cs cq <<<"$row"
		printf '  %-26s %7s %9s %9s %5s %11s %11s %10s %11s %11s\n' "$what" "$k" "$pm" "$pw" "$goal" "$bm" "$bw" "$rm" "$cs" "${cq:--}"
	done
	[ ${#ho_leak[@]} -gt 0 ] || ho_leak=("no figures")
	printf 'handover leaks: %s\n' "${ho_leak[@]}"
fi
exit $failed
