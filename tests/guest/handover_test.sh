#!/bin/bash
# Guest test of issue 36's hand-over for `vmio vsock`: one boot of the
# guest under `vmio vsock --control` with two VMs in one group (the QEMU
# guest, CID 3, and a sibling VM, CID 4, driven by the in-tree front end:
# tests/guest/handover-sibling.c), then 20 `vmio reload`s while the guest
# keeps its connections (tests/guest/handover-guest.sh says which). The
# reloads alternate between two builds: the tip (--vmio) and the vmio of
# the commit named in tests/guest/handover-prev.commit, built once per
# commit (scripts/guest/build-prev.sh, under --prev-cache). Each swap is
# what a package upgrade does: the other binary copied beside the path
# vmio was started from and renamed over it, then `vmio reload CONTROL`.
# A refused reload whose reason names the router is tried again (up to 5
# times, 200 ms apart) and counted: since 6dae97e none is, the router's
# flows and packets travel. The sibling VM's driver stays attached through
# every reload, and a sibling connection carries a stream through them
# (VMIO_HANDOVER_SIBLING_ACROSS= empty: opened after them, as for a build
# before 6dae97e, whose successor resets it). Between reloads 10 and 11, a
# refused one: a non-executable file renamed over the path; the reload
# must exit nonzero with the reason and the same process go on serving.
#
# Checked:
#   - every reload exits 0, and the pid serving --control changes each
#     time, to a process running the file just installed (its inode); the
#     old process exits
#   - the refused reload exits nonzero, says why, and the pid stays
#   - vmio's own counters (vmio stats --json, never its log): over the
#     reloads, no RST either way, no connection ended or refused, no
#     vhost-user session ended, no protocol or rx error; every connection
#     open before is still open after, with the same ports and state
#   - every stream, byte for byte at its receiver (the pattern of
#     peer-engine.h), with the writer checking the receiver's count and
#     checksum: nothing lost, nothing repeated; the seqpacket echo checks
#     every message's length and bytes; the idle connection carries 64 KiB
#     and the reply after the 20 reloads; the hybrid connection whose
#     CONNECT line was half written before the first reload is finished
#     after the 7th, gets its OK line and carries a stream
#   - the guest's kernel log has no vsock or virtio line, none at warning
#     level or worse; QEMU logs nothing about its vhost-user device
# Reported: the reload times, the refusals, and the longest gap each
# receiver saw between two reads (the pause a hand-over costs a stream
# paced at 32 KiB/s, in reads of at most 64 KiB).
#
# usage: tests/guest/handover_test.sh [--platform NAME] [--image ROOT]
#          [--vmio BIN] [--vsock-tool BIN] [--uds-peer BIN]
#          [--handover-peer BIN] [--sibling BIN] [--prev-cache DIR]
# (defaults: 6.1, build/guest, build/vmio, build/tests/guest/..., build).
# VMIO_HANDOVERS (default 20) changes the count; VMIO_HANDOVER_SIBLING_ACROSS=
# (empty) opens the sibling stream after the reloads instead of before. Exit 0 when everything
# passed; 1 with "handover_test: FAIL: ..." lines otherwise.
# Logs: ROOT/NAME/logs/handover_test.*.log.
set -euo pipefail

name=handover_test
# shellcheck source=tests/guest/vsock-host.sh
. "$(dirname "$0")/vsock-host.sh"
# shellcheck source=tests/guest/handover-host.sh
. "$(dirname "$0")/handover-host.sh"
# The boot, the 20 reloads (each under a second) and the streams' end.
limit=${VMIO_GUEST_TIMEOUT:-400}
hpeer='' sibling='' prev_cache=''
rest=()
while (($#)); do
	case $1 in
	--handover-peer) hpeer=$2; shift 2 ;;
	--sibling) sibling=$2; shift 2 ;;
	--prev-cache) prev_cache=$2; shift 2 ;;
	*) rest+=("$1"); shift ;;
	esac
done
vh_setup "${rest[@]}"
hpeer=${hpeer:-$(dirname "$tool")/handover-peer}
sibling=${sibling:-$(dirname "$tool")/handover-sibling}
prev_cache=${prev_cache:-$top/build}
for b in "$hpeer" "$sibling"; do
	[[ -x $b ]] || fail "$b is missing: build with 'ninja -C build'"
done
HANDOVERS=${VMIO_HANDOVERS:-20}
FINISH_LINE_AT=7 # the reload after which the half line is finished
REFUSE_AT=10     # the refused reload comes after this one
RATE=32768

# --- the two builds, and the path vmio is started from -------------------
prev_rev=$(grep -v '^#' "$top/tests/guest/handover-prev.commit" | head -n1)
[[ -n $prev_rev ]] || fail "tests/guest/handover-prev.commit names no commit"
prev_bin=$("$top/scripts/guest/build-prev.sh" "$prev_rev" "$prev_cache") ||
	fail "cannot build vmio at $prev_rev (build-prev.sh said why above)"
bindir=$tmp/bin
mkdir -p "$bindir"
cp "$vmio" "$bindir/vmio-tip"
cp "$prev_bin" "$bindir/vmio-prev"
builds=("$bindir/vmio-prev" "$bindir/vmio-tip") # reload i installs builds[i % 2]
client=$bindir/vmio-tip                          # runs stats and reload
start_path=$bindir/vmio
install_at_start "$bindir/vmio-tip"
echo "$name: builds: tip $("$client" --version 2>&1 | head -n1), prev $(git -C "$top" rev-parse --short "$prev_rev") ($prev_bin)"

# --- vmio's counters -----------------------------------------------------
ctl=$tmp/control.sock
# The counters that matter, one "key value" a line, and each connection
# as "conn VM GUEST_PORT HOST_PORT TYPE INITIATOR STATE".
snapshot() { # file (and the document itself as file.json)
	"$client" stats --json "$ctl" >"$1.json" 2>/dev/null || true
	python3 -c '
import json, sys
d = json.load(sys.stdin)
print("pid", d["pid"])
for vm in d["vms"]:
    n = vm["vm"]
    for k in ("sessions", "protocol_errors", "connections_open", "connections_opened",
              "connections_ended", "connections_refused", "rsts_unmatched", "rx_errors"):
        print("vm%d.%s %d" % (n, k, vm[k]))
    print("vm%d.connected %d" % (n, 1 if vm["connected"] else 0))
    for k, v in sorted(vm["session_ends"].items()):
        print("vm%d.session_ends.%s %d" % (n, k, v))
    for k, v in sorted(vm["totals"].items()):
        print("vm%d.%s %d" % (n, k, v))
    for c in vm["connections"]:
        print("conn %d %d %d %s %s %s" % (n, c["guest_port"], c["host_port"], c["type"],
                                          c["initiator"], c["state"]))
' <"$1.json" >"$1"
}
sval() { sed -n "s/^$2 //p" "$1"; } # file key
# What vmio has taken from the guest on the held stream (to <uds>_5206).
held_bytes() {
	"$client" stats --json "$ctl" 2>/dev/null | python3 -c '
import json, sys
for c in json.load(sys.stdin)["vms"][0]["connections"]:
    if c["initiator"] == "guest" and c["host_port"] == 5206:
        print(c["bytes_from_guest"])
' 2>/dev/null || true
}

# --- host services, the sibling, vmio, QEMU -------------------------------
sock2=$tmp/vhost2.sock
uds2=$tmp/vm2.vsock
socks=("$sock" "$sock2")
vh_spawn 5201 "$hpeer" recv "unix-listen:${uds}_5201" --timeout "$limit"
vh_spawn 5203 "$hpeer" recv "unix-listen:${uds}_5203" --timeout "$limit"
# A slow reader: the guest's bytes pile up in vmio, which holds them
# through every reload.
vh_spawn 5206 "$hpeer" recv "unix-listen:${uds}_5206" --read-size 4096 --read-delay-ms 100 --timeout "$limit"
# --connect-timeout: the half-written CONNECT line waits through 7 reloads.
vmio=$start_path
vh_start_vmio --vm "guest-cid=3,socket=$sock,uds-path=$uds" \
	--vm "guest-cid=4,socket=$sock2,uds-path=$uds2" \
	--control "$ctl" --connect-timeout 600000
first_pid=$vpid
vmio_pids=("$vpid")
# Whatever ended the script: no vmio of this run left, old or new.
# shellcheck disable=SC2317 # called from vh_cleanup
vh_cleanup_hook() {
	local p
	for p in "${vmio_pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
}
vh_spawn 7000 "$sibling" --socket "$sock2" --cid 4 --port 7000 --timeout "$limit"
wait_log listening 10 "$logs/$name.host-7000.log" ||
	fail "the sibling VM did not come up: $(cat "$logs/$name.host-7000.log")"
# The sibling stream through the reloads (the router's flows handed over
# since 6dae97e); with VMIO_HANDOVER_SIBLING_ACROSS set empty, a sibling
# connection opened after them instead.
across=${VMIO_HANDOVER_SIBLING_ACROSS-1}
vh_boot "$top/tests/guest/handover-guest.sh" --file "$hpeer:/bin/handover-peer" \
	${across:+--append SIBLING=across}

ready=
declare -a reload_ms=()
refusals=0
stale=0
refusal_reasons=()
refused_msg=
handovers_done=0
if vh_wait_marker HANDOVER-READY; then
	ready=1
	vh_spawn 6202 "$hpeer" send "hybrid:$uds:6202" --rate $RATE --timeout "$limit"
	vh_spawn 6204 "$hpeer" seq-send "hybrid:$uds:6204" --rate 5 --timeout "$limit"
	vh_spawn 6205 "$hpeer" send "hybrid:$uds:6205" --half-connect --rate $((RATE / 2)) --timeout "$limit"
	# Every connection carries bytes (the idle one and the half line
	# aside) before the first reload.
	for w in "5201 first-byte" "5203 connected" "5206 first-byte" "6202 connected" "6204 connected" \
		"6205 half-written" ${across:+"7000 first-byte"}; do
		wait_log "${w#* }" 30 "$logs/$name.host-${w% *}.log" ||
			bad "before the reloads: host-${w% *} never said '${w#* }': $(tail -n 2 "$logs/$name.host-${w% *}.log")"
	done
	grep -q '^HO-' "$serial" && bad "a guest connection ended before the reloads: $(grep '^HO-' "$serial" | head -n 2)"
	# The held stream: once the guest's writer has run out of credit
	# (what vmio took grows by no more than the slow reader's pace, 40
	# KB/s), vmio holds --tx-buffer-size (256 KiB) of its bytes, and does
	# so at every reload that follows, the reader being slower still.
	held_from=
	prev_from=-1
	for _ in $(seq 60); do
		held_from=$(held_bytes)
		[[ $held_from =~ ^[0-9]+$ ]] && ((prev_from >= 0 && held_from - prev_from < 65536)) && break
		prev_from=${held_from:--1}
		held_from=
		sleep 0.5
	done
	[[ -n $held_from ]] || bad "the held stream (guest -> <uds>_5206) never ran out of credit within 30 s: vmio holds none of its bytes"
fi

# --- the reloads ------------------------------------------------------------
# One reload of the file now at the start path; sets rc_out. Refusals for
# sibling packets in the router are retried.
reload_once() { # number
	local tries=0 t0 out rc
	while :; do
		tries=$((tries + 1))
		t0=$(date +%s%N)
		rc=0
		out=$("$client" reload --timeout 30000 "$ctl" 2>&1) || rc=$?
		reload_ms+=("$((($(date +%s%N) - t0) / 1000000))")
		((rc != 0)) || return 0
		if grep -qiE 'sibling|router' <<<"$out" && ((tries < 5)); then
			refusals=$((refusals + 1))
			refusal_reasons+=("$out")
			sleep 0.2
			continue
		fi
		rc_out="exit $rc after $tries tries: $out"
		return 1
	done
}

if [[ -n $ready && ${#failures[@]} -eq 0 ]]; then
	snapshot "$logs/$name.stats-before.log"
	pid=$(sval "$logs/$name.stats-before.log" pid)
	[[ $pid == "$vpid" ]] || bad "the control socket is served by pid $pid, not vmio's $vpid"
	for ((i = 1; i <= HANDOVERS; i++)); do
		bin=${builds[i % 2]}
		install_at_start "$bin"
		ino=$(stat -c %i "$start_path")
		if ! reload_once "$i"; then
			bad "reload $i (to ${bin##*/vmio-}): $rc_out"
			break
		fi
		took_over "reload $i (to ${bin##*/vmio-})" "$pid" "$ino" || break
		new=$new_pid
		pid=$new
		vmio_pids+=("$new")
		vpid=$new # what vh_cleanup stops, and whose CPU time is reported
		handovers_done=$i
		if ((i == FINISH_LINE_AT)); then
			# The CONNECT line written half before reload 1: its rest.
			kill -USR2 "${hpid[6205]}"
			wait_log '^handover-peer: connected' 30 "$logs/$name.host-6205.log" ||
				bad "hybrid: no OK line after the CONNECT line was finished: $(tail -n 2 "$logs/$name.host-6205.log")"
		fi
		if ((i == REFUSE_AT)); then
			# A refused hand-over: a file that cannot be run at the path.
			printf '#!/bin/false\n' >"$start_path.dpkg-new"
			chmod 644 "$start_path.dpkg-new"
			mv -f "$start_path.dpkg-new" "$start_path"
			rc=0
			refused_msg=$("$client" reload --timeout 30000 "$ctl" 2>&1) || rc=$?
			if ((rc == 0)); then
				bad "the reload with a non-executable $start_path exited 0: $refused_msg"
			elif [[ -z $refused_msg ]]; then
				bad "the refused reload (exit $rc) said nothing about why"
			fi
			[[ $(serving_pid) == "$pid" ]] || bad "after the refused reload the control socket is served by '$(serving_pid)', not $pid"
			install_at_start "${builds[(i + 1) % 2]}"
		fi
		((${#failures[@]} == 0)) || break
		sleep 0.3
	done
	snapshot "$logs/$name.stats-after.log"
	# vmio's counters over the reloads.
	while read -r key b; do
		a=$(sval "$logs/$name.stats-after.log" "$key")
		case $key in
		*.rsts_sent | *.rsts_received | *.rsts_unmatched | *.connections_ended | *.connections_refused | \
			*.protocol_errors | *.rx_errors | *.session_ends.* | *.sessions | *.connected)
			[[ $a == "$b" ]] || bad "vmio's $key went from $b to $a over the reloads" ;;
		vm1.connections_opened | vm1.connections_open)
			# The hybrid connection finished after reload 7.
			[[ $a == $((b + 1)) ]] || bad "vmio's $key went from $b to $a over the reloads (one more expected: the hybrid connection)" ;;
		esac
	done < <(grep -E '^vm[0-9]+\.' "$logs/$name.stats-before.log")
	while read -r line; do
		grep -qxF "$line" "$logs/$name.stats-after.log" || bad "a connection open before the reloads is gone or changed after them: $line (after: $(grep "^conn $(cut -d" " -f2,3 <<<"$line") " "$logs/$name.stats-after.log" || echo none))"
	done < <(grep '^conn ' "$logs/$name.stats-before.log")
fi

# --- the end: the host's writers, then the guest's ------------------------
if [[ -n $ready ]]; then
	# (A run that failed before reload 7 finishes the half line here.)
	kill -USR2 "${hpid[6205]}" 2>/dev/null || true
	wait_log '^handover-peer: \(connected\|.*result=\)' 30 "$logs/$name.host-6205.log" || true
	for port in 6202 6204 6205; do
		kill -USR1 "${hpid[$port]}" 2>/dev/null || true
	done
	# The stop signal, on a new connection: the guest's writers finish.
	"$peer" connect "$uds" 6209 --mode source 1 --retry 10 --timeout 30 \
		>"$logs/$name.host-6209.log" 2>&1 || bad "the stop connection failed: $(tail -n 1 "$logs/$name.host-6209.log")"
	# Once the guest has stopped its writers, the held stream's reader
	# reads at full speed: what vmio and the sockets hold drains, then
	# the guest's writer ends.
	vh_wait_marker HANDOVER-STOPPED || bad "the guest never printed HANDOVER-STOPPED"
	kill -USR1 "${hpid[5206]}" 2>/dev/null || true
fi
vh_finish_guest
[[ -z $ready ]] || vh_expect_steps g2h idle held sibling h2g seqpacket hybrid dmesg
vh_wait_services
if [[ -n $ready ]]; then
	((handovers_done == HANDOVERS)) || bad "$handovers_done of $HANDOVERS reloads done"
	for port in 5201 5203 5206 6202 6204 6205 7000; do
		[[ $(grep 'result=' "$logs/$name.host-$port.log" | tail -n 1) == *result=ok* ]] ||
			bad "host-$port: $(grep -v -e listening -e connected "$logs/$name.host-$port.log" | tail -n 2)"
	done
	# The idle connection carried its 64 KiB after the reloads.
	[[ $(hl 5203) == *" recvd=65536 "*result=ok* ]] || bad "idle: the host received: $(hl 5203)"
fi
# QEMU's log: nothing about the vhost-user device going away.
qlog=${serial%.serial.log}.run-guest.log
qsaid=$(grep -v "^$name: " "$qlog" 2>/dev/null | grep -iE 'vhost|vsock|disconnect' | head -n 3 || true)
[[ -z $qsaid ]] || bad "QEMU logged: $qsaid"
# The first vmio is this script's child: reaped once it has handed over.
[[ $first_pid == "$vpid" ]] || wait "$first_pid" 2>/dev/null || true

# --- report ---------------------------------------------------------------
gap() { sed -n 's/.* max_gap_ms=\([0-9]*\).*/\1/p' <<<"$1"; }
echo "$name: results (TCG guest, one vCPU):"
if ((${#reload_ms[@]})); then
	sorted=$(printf '%s\n' "${reload_ms[@]}" | sort -n)
	echo "  reloads: $handovers_done of $HANDOVERS done; ${#reload_ms[@]} runs of 'vmio reload', median $(sed -n "$(((${#reload_ms[@]} + 1) / 2))p" <<<"$sorted") ms, worst $(tail -n1 <<<"$sorted") ms"
fi
echo "  held stream: vmio held its 256 KiB of guest bytes through every reload (the guest out of credit after ${held_from:-?} bytes); $(hl 5206 | sed -n 's/.* \(recvd=[0-9]*\) .*/\1/p') in all"
echo "  refused for sibling packets in flight (tried again): $refusals${refusal_reasons[0]:+ (e.g. \"${refusal_reasons[0]}\")}"
echo "  the old pid still answering --control right after a reload's exit 0: $stale time(s)"
echo "  refused hand-over (non-executable file): \"${refused_msg:-}\""
echo "  longest gap between two reads (the pause a reload costs; the writers pace ${RATE} B/s, sibling and hybrid half):"
echo "    g2h      host   $(gap "$(hl 5201)") ms   $(hl 5201 | sed -n 's/.* \(recvd=[0-9]*\) .*/\1/p')"
echo "    h2g      guest  $(gap "$(grep '^HO-h2g ' <<<"$con" || true)") ms   $(grep '^HO-h2g ' <<<"$con" | sed -n 's/.* \(recvd=[0-9]*\) .*/\1/p')"
echo "    sibling  VM 4   $([[ -n $across ]] || echo "(opened after the reloads) ")$(gap "$(grep result= "$logs/$name.host-7000.log" 2>/dev/null || true)") ms   $(grep result= "$logs/$name.host-7000.log" 2>/dev/null | sed -n 's/.* \(recvd=[0-9]*\) .*/\1/p')"
echo "    hybrid   guest  $(gap "$(grep '^HO-hybrid ' <<<"$con" || true)") ms (from its first byte, after reload $FINISH_LINE_AT)"
echo "    seqpacket echo  $(gap "$(hl 6204)") ms   $(hl 6204 | sed -n 's/.* \(msgs=[0-9]*\) .*/\1/p')"
vh_conclude
